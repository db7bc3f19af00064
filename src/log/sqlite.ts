// The embedded EventLog: one SQLite file (WAL, synchronous=FULL), written by this process alone.
// Appends are group-committed; public events get their per-workspace offset inside the commit, in
// commit order, from the one sequencer that owns the file.
import type Database from 'better-sqlite3';
import { isPublicEventType } from '../domain/event-types.js';
import { systemMicros, type MicrosClock } from './clock.js';
import {
  LogUnavailable,
  WrongExpectedRevision,
  type AppendResult,
  type EventLog,
  type ExpectedRevision,
  type FeedQuery,
  type JsonObject,
  type NewEvent,
  type ReadAllOptions,
  type RecordedEvent,
} from './event-log.js';
import { groupCommit } from './sqlite-group-commit.js';
import { openLogDatabase } from './sqlite-open.js';
import { commitSignal, subscribeLoop, type Page } from './sqlite-subscription.js';

export interface SqliteLogOptions {
  readonly file: string;
  /** Offsets come from it; defaults to the system clock. */
  readonly clock?: MicrosClock;
  /** Events per read while a subscription catches up. */
  readonly pageSize?: number;
}

export interface SqliteEventLog extends EventLog {
  /** Commits so far and the writes they carried (group-commit efficiency, for tests and benchmarks). */
  stats(): { readonly transactions: number; readonly writes: number };
}

interface Row {
  readonly position: number;
  readonly id: string;
  readonly stream: string;
  readonly revision: number;
  readonly workspace_id: string;
  readonly type: string;
  readonly data: string;
  readonly metadata: string;
  readonly feed_offset: number | null;
}

const COLUMNS = 'position, id, stream, revision, workspace_id, type, data, metadata, feed_offset';

const toRecord = (row: Row): RecordedEvent => ({
  id: row.id,
  type: row.type,
  workspaceId: row.workspace_id,
  stream: row.stream,
  revision: row.revision,
  position: row.position,
  offset: row.feed_offset,
  data: JSON.parse(row.data) as JsonObject,
  metadata: JSON.parse(row.metadata) as JsonObject,
});

const typesParam = (types: readonly string[] | undefined): string | undefined =>
  types === undefined ? undefined : JSON.stringify(types);

/** Statements for the optional filters, prepared once per combination used. */
const filteredReads = (db: Database.Database) => {
  const cache = new Map<string, Database.Statement>();
  const prepare = (key: string, sql: () => string): Database.Statement => {
    let statement = cache.get(key);
    if (!statement) {
      statement = db.prepare(sql());
      cache.set(key, statement);
    }
    return statement;
  };
  const typeClause = (types: string | undefined) => (types === undefined ? '' : ' AND type IN (SELECT value FROM json_each(@types))');
  return {
    all: (options: ReadAllOptions): Row[] => {
      const types = typesParam(options.types);
      const ws = options.workspaceId;
      const statement = prepare(`all:${types !== undefined}:${ws !== undefined}`, () =>
        `SELECT ${COLUMNS} FROM events WHERE position > @after${ws === undefined ? '' : ' AND workspace_id = @ws'}` +
        `${typeClause(types)} ORDER BY position LIMIT @limit`,
      );
      return statement.all({ after: options.after, limit: options.limit ?? -1, ...(types === undefined ? {} : { types }), ...(ws === undefined ? {} : { ws }) }) as Row[];
    },
    feed: (query: FeedQuery): Row[] => {
      const types = typesParam(query.types);
      const statement = prepare(`feed:${types !== undefined}`, () =>
        `SELECT ${COLUMNS} FROM events WHERE workspace_id = @ws AND feed_offset >= @from${typeClause(types)}` +
        ' ORDER BY feed_offset LIMIT @limit',
      );
      return statement.all({ ws: query.workspaceId, from: query.fromOffset, limit: query.limit, ...(types === undefined ? {} : { types }) }) as Row[];
    },
  };
};

export const openSqliteLog = (options: SqliteLogOptions): SqliteEventLog => {
  const db = openLogDatabase(options.file);
  const clock = options.clock ?? systemMicros;
  const pageSize = options.pageSize ?? 1000;

  const statements = {
    insert: db.prepare(
      'INSERT INTO events (id, stream, revision, workspace_id, type, data, metadata, feed_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    byId: db.prepare(`SELECT ${COLUMNS} FROM events WHERE id = ?`),
    lastRevision: db.prepare('SELECT max(revision) FROM events WHERE stream = ?').pluck(),
    stream: db.prepare(`SELECT ${COLUMNS} FROM events WHERE stream = ? AND revision >= ? ORDER BY revision`),
    deleteStream: db.prepare('DELETE FROM events WHERE stream = ?'),
    saveOffset: db.prepare(
      'INSERT INTO workspace_offsets (workspace_id, last_offset) VALUES (?, ?) ON CONFLICT (workspace_id) DO UPDATE SET last_offset = excluded.last_offset',
    ),
  };
  const reads = filteredReads(db);

  // The sequencer's memory: committed values, and what the open batch has staged on top of them.
  const offsets = new Map(
    (db.prepare('SELECT workspace_id, last_offset FROM workspace_offsets').raw().all() as [string, number][]).map(([ws, offset]) => [ws, offset]),
  );
  let stagedOffsets = new Map<string, number>();
  let head = (db.prepare("SELECT seq FROM sqlite_sequence WHERE name = 'events'").pluck().get() as number | undefined) ?? 0;
  let stagedHead = head;

  const commits = commitSignal();
  const subscriptions = new Set<{ stop(): Promise<void> }>();
  let closed = false;

  const writer = groupCommit(db, {
    beforeCommit: () => stagedOffsets.forEach((offset, ws) => statements.saveOffset.run(ws, offset)),
    afterCommit: () => {
      stagedOffsets.forEach((offset, ws) => offsets.set(ws, offset));
      stagedOffsets = new Map();
      head = stagedHead;
      commits.notify();
    },
    afterRollback: () => {
      stagedOffsets = new Map();
      stagedHead = head;
    },
  });

  const ensureOpen = (): void => {
    if (closed) throw new LogUnavailable(`event log ${options.file} is closed`);
  };

  const checkExpected = (stream: string, expected: ExpectedRevision, actual: number | null): void => {
    const holds = expected === 'any' || (expected === 'no_stream' ? actual === null : actual === expected);
    if (!holds) throw new WrongExpectedRevision(stream, expected, actual ?? 'no_stream');
  };

  /** Runs inside the group transaction; throwing rolls back this call alone. */
  const appendNow = (stream: string, events: readonly NewEvent[], expected: ExpectedRevision): AppendResult => {
    const known = events.map((event) => statements.byId.get(event.id) as Row | undefined);
    const knownCount = known.filter((row) => row !== undefined).length;
    const last = statements.lastRevision.get(stream) as number | null;
    if (knownCount > 0 && knownCount === events.length) {
      const records = (known as Row[]).map(toRecord);
      return { nextRevision: last ?? (records.at(-1)?.revision ?? -1), records };
    }
    if (knownCount > 0) throw new Error(`append to ${stream}: ${knownCount} of ${events.length} event ids are already in the log`);
    checkExpected(stream, expected, last);

    // Offsets are staged per call and merged only once every insert succeeded.
    const now = clock();
    const callOffsets = new Map<string, number>();
    let position = stagedHead;
    const records = events.map((event, i): RecordedEvent => {
      const metadata = event.metadata ?? {};
      let offset: number | null = null;
      if (isPublicEventType(event.type)) {
        const previous = callOffsets.get(event.workspaceId) ?? stagedOffsets.get(event.workspaceId) ?? offsets.get(event.workspaceId) ?? 0;
        offset = Math.max(now, previous + 1);
        callOffsets.set(event.workspaceId, offset);
      }
      const revision = (last ?? -1) + 1 + i;
      const info = statements.insert.run(
        event.id, stream, revision, event.workspaceId, event.type, JSON.stringify(event.data), JSON.stringify(metadata), offset,
      );
      position = Number(info.lastInsertRowid);
      return { id: event.id, type: event.type, workspaceId: event.workspaceId, data: event.data, metadata, stream, revision, position, offset };
    });
    callOffsets.forEach((offset, ws) => stagedOffsets.set(ws, offset));
    stagedHead = position;
    return { nextRevision: (last ?? -1) + events.length, records };
  };

  const readPage = (filter: Pick<ReadAllOptions, 'types' | 'workspaceId'>) => (after: number): Page => {
    const events = reads.all({ ...filter, after, limit: pageSize }).map(toRecord);
    const full = events.length === pageSize;
    return { events, scannedTo: full ? (events.at(-1) as RecordedEvent).position : head };
  };

  return {
    append: async (stream, events, expected) => {
      ensureOpen();
      return writer.submit(() => appendNow(stream, events, expected));
    },
    readStream: async (stream, fromRevision = 0) => {
      ensureOpen();
      return (statements.stream.all(stream, fromRevision) as Row[]).map(toRecord);
    },
    readAll: async (options) => {
      ensureOpen();
      return reads.all(options).map(toRecord);
    },
    readFeed: async (query) => {
      ensureOpen();
      return reads.feed(query).map(toRecord);
    },
    subscribe: (options, handler) => {
      ensureOpen();
      const { after, ...filter } = options;
      const subscription = subscribeLoop(after, readPage(filter), commits, handler);
      subscriptions.add(subscription);
      void subscription.done.then(
        () => subscriptions.delete(subscription),
        () => subscriptions.delete(subscription),
      );
      return subscription;
    },
    // Through the writer, so it lands in call order relative to appends already submitted.
    deleteStream: async (stream) => {
      ensureOpen();
      await writer.submit(() => statements.deleteStream.run(stream));
    },
    headPosition: async () => {
      ensureOpen();
      return head;
    },
    stats: () => ({ ...writer.stats }),
    close: async () => {
      if (closed) return;
      closed = true;
      await writer.drain();
      await Promise.all([...subscriptions].map((subscription) => subscription.stop()));
      db.close();
    },
  };
};
