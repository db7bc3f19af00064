// The SQLite EventLog: one file (WAL, synchronous=FULL unless relaxed), written by this process alone (embedded
// mode, the default) or by several processes of one host (shared mode). Appends are group-committed
// per process in BEGIN IMMEDIATE transactions; stream revisions, positions and each workspace's last
// offset are read inside the write transaction, so offsets strictly increase per workspace in commit
// order whichever process commits.
import { setTimeout as sleep } from 'node:timers/promises';
import { isPublicEventType } from '../domain/event-types.js';
import { systemMicros, type MicrosClock } from './clock.js';
import {
  LogUnavailable,
  WrongExpectedRevision,
  type AppendResult,
  type EventLog,
  type ExpectedRevision,
  type LogSubscription,
  type NewEvent,
  type ReadAllOptions,
  type RecordedEvent,
  type StreamAppend,
} from './event-log.js';
import { exportReader, type ExportQuery, type ExportRow } from './sqlite-export.js';
import { groupCommit } from './sqlite-group-commit.js';
import { rowInserter, type InsertRow } from './sqlite-insert.js';
import { createBoundedCache } from '../shared/bounded-cache.js';
import { openLogDatabase, WAL_AUTOCHECKPOINT_PAGES } from './sqlite-open.js';
import { walCheckpointerOnDemand } from '../shared/wal-checkpointer.js';
import { COLUMNS, filteredReads, metadataText, toRecord, type Row } from './sqlite-rows.js';
import { commitSignal, foreignCommits, subscribeLoop, type Page } from './sqlite-subscription.js';

export interface SqliteLogOptions {
  readonly file: string;
  /** Offsets come from it; defaults to the system clock. */
  readonly clock?: MicrosClock;
  /** Events per read while a subscription catches up. */
  readonly pageSize?: number;
  /** Several processes of this host share the file (default: this process alone, others refused). */
  readonly shared?: boolean;
  /** Shared mode: how long a write waits for another process's transaction, in ms (default 5000). */
  readonly busyTimeoutMs?: number;
  /** Shared mode: how often live subscriptions look for other processes' commits, in ms (default 10). */
  readonly pollIntervalMs?: number;
  /**
   * Threads of this process sharing the file: this connection announces each commit on the named
   * BroadcastChannel (`announce`), or wakes its live subscriptions at each one announced there
   * (`hear`), sooner than the next poll.
   */
  readonly commitsChannel?: { readonly name: string; readonly role: 'announce' | 'hear' };
  /** Whether each commit of this connection is fsynced (default `full`; see OpenMode). */
  readonly durability?: 'full' | 'relaxed';
  /** Events a deleteStream removes per transaction (default DELETE_BATCH). */
  readonly deleteBatch?: number;
}

export interface SqliteEventLog extends EventLog {
  /** Several streams in one commit, all or nothing, like one append. */
  appendAll(parts: readonly StreamAppend[]): Promise<AppendResult[]>;
  /** Commits so far and the writes they carried (group-commit efficiency), and whether commits are fsynced, as SQLite has it. */
  stats(): { readonly transactions: number; readonly writes: number; readonly durability: 'full' | 'relaxed' };
  /** scripts/export.ts only: public events as raw rows with the data's stored JSON text (sqlite-export.ts). */
  exportPages(query: ExportQuery): Iterable<ExportRow[]>;
}

/**
 * A stream's deletion removes this many events a transaction, newest first, and pauses between them.
 * One statement over a long delivery history held the write lock for all of it (5.1 s at 1,000,000
 * events; 9.5 s with random ids, as older logs have, and another connection's commit failed past its
 * 5 s busy timeout), and this thread as long when it ran here. SQLite's lock is not fair: without
 * the pause, the batches starved a writer of another connection retrying on its timer
 * (`npm run bench -- stream-delete`; ARCHITECTURE.md, "The log").
 */
const DELETE_BATCH = 250;
const DELETE_PAUSE_MS = 5;

/** Streams whose last revision a connection keeps (see `revisions` below): about 11 MB of heap at the bound. */
const REVISIONS_KEPT = 65_536;

const holds = (expected: ExpectedRevision, actual: number | null): boolean =>
  expected === 'any' || (expected === 'no_stream' ? actual === null : actual === expected);

/** The error of an INSERT that met an event id already in the log (or twice in the call). */
const isKnownId = (error: unknown): boolean =>
  (error as { code?: unknown }).code === 'SQLITE_CONSTRAINT_UNIQUE' && (error as Error).message.endsWith('events.id');

export const openSqliteLog = (options: SqliteLogOptions): SqliteEventLog => {
  const shared = options.shared ?? false;
  const busyTimeoutMs = options.busyTimeoutMs ?? 5000;
  const db = openLogDatabase(options.file, { shared, busyTimeoutMs, ...(options.durability === undefined ? {} : { durability: options.durability }) });
  const clock = options.clock ?? systemMicros;
  const pageSize = options.pageSize ?? 1000;
  const deleteBatch = options.deleteBatch ?? DELETE_BATCH;
  // A connection whose commits answer requests leaves the WAL's checkpoints to a thread of its own,
  // at a quarter of its own threshold, which stays as the bound. Exclusive locking admits no second connection.
  const checkpointer =
    shared && options.durability !== 'relaxed'
      ? walCheckpointerOnDemand(options.file, { afterFrames: WAL_AUTOCHECKPOINT_PAGES / 4, pageBytes: db.pragma('page_size', { simple: true }) as number })
      : null;

  const statements = {
    byId: db.prepare(`SELECT ${COLUMNS} FROM events WHERE id = ?`).raw(),
    lastRevision: db.prepare('SELECT max(revision) FROM events WHERE stream = ?').pluck(),
    stream: db.prepare(`SELECT ${COLUMNS} FROM events WHERE stream = ? AND revision >= ? ORDER BY revision`).raw(),
    deleteNewest: db.prepare('DELETE FROM events WHERE position IN (SELECT position FROM events WHERE stream = ? ORDER BY revision DESC LIMIT ?)'),
    lastOffset: db.prepare('SELECT last_offset FROM workspace_offsets WHERE workspace_id = ?').pluck(),
    // The last event that exists: positions of a deleted tail are never read again (AUTOINCREMENT
    // still keeps them from being reused), so no reader may wait for them.
    head: db.prepare('SELECT max(position) FROM events').pluck(),
    // Changes when another connection commits.
    dataVersion: db.prepare('PRAGMA data_version').pluck(),
    // What watchFeed tells of each public event (offsets are given to public events alone). In
    // position order through the rowid: the feed index would have to be sorted. Its live tail passes
    // each row once, reading its header only unless the row is public.
    feedMarks: db.prepare('SELECT position, workspace_id, feed_offset FROM events NOT INDEXED WHERE position > ? AND feed_offset IS NOT NULL ORDER BY position LIMIT ?').raw(),
    saveOffset: db.prepare(
      'INSERT INTO workspace_offsets (workspace_id, last_offset) VALUES (?, ?) ON CONFLICT (workspace_id) DO UPDATE SET last_offset = excluded.last_offset',
    ),
  };
  const insert = rowInserter(db);
  const reads = filteredReads(db);
  const exportPages = exportReader(db);

  // The sequencer's memory lives one batch: the last offsets the open transaction has staged. Read
  // from the table under the write lock, a shared file's offsets reflect every process's commits.
  let stagedOffsets = new Map<string, number>();
  const lastOffset = (ws: string): number => stagedOffsets.get(ws) ?? (statements.lastOffset.get(ws) as number | undefined) ?? 0;
  const headNow = (): number => (statements.head.get() as number | null) ?? 0;

  // The last revision of the streams this connection appended to or looked up under the write lock:
  // an append to a stream written lately skips the index lookup (its statement; the insert then
  // reads the index page: 1-9% less time in appendParts, chosen at random per batch in one process).
  // Another connection's commit may have moved or deleted any stream, so a batch that finds the file
  // changed since this connection's last transaction (data_version) forgets them all, and so does a
  // batch that rolled back.
  const revisions = createBoundedCache<number | null>(REVISIONS_KEPT);
  let seenVersion = statements.dataVersion.get() as number;
  const lastRevision = (stream: string): number | null => {
    const known = revisions.get(stream);
    if (known !== undefined) return known;
    const last = (statements.lastRevision.get(stream) as number | null) ?? null;
    revisions.set(stream, last);
    return last;
  };

  const commits = commitSignal();
  const foreign = shared
    ? foreignCommits(() => statements.dataVersion.get() as number, commits, options.pollIntervalMs ?? 10)
    : undefined;
  const channel = options.commitsChannel === undefined ? undefined : new BroadcastChannel(options.commitsChannel.name);
  const announce = options.commitsChannel?.role === 'announce' ? channel : undefined;
  if (channel !== undefined && options.commitsChannel?.role === 'hear') channel.onmessage = () => commits.notify();
  // The channel never keeps the process (or thread) alive.
  channel?.unref();
  const subscriptions = new Set<{ stop(): Promise<void> }>();
  let closed = false;
  /** Streams this connection is deleting, and when each deletion ends: appends to them wait for it. */
  const deleting = new Map<string, Promise<void>>();
  const afterDeletionOf = async (streams: readonly string[]): Promise<void> => {
    for (const stream of streams) await deleting.get(stream)?.catch(() => undefined);
    // Closed meanwhile: refused as any call after a close.
    ensureOpen();
  };

  const writer = groupCommit(db, {
    begin: () => {
      const version = statements.dataVersion.get() as number;
      if (version === seenVersion) return;
      seenVersion = version;
      revisions.clear();
    },
    beforeCommit: () => stagedOffsets.forEach((offset, ws) => statements.saveOffset.run(ws, offset)),
    afterCommit: () => {
      checkpointer?.committed();
      stagedOffsets = new Map();
      commits.notify();
      announce?.postMessage(null);
    },
    afterRollback: () => {
      stagedOffsets = new Map();
      revisions.clear();
    },
  }, { lockWaitMs: shared ? busyTimeoutMs : 0 });

  const ensureOpen = (): void => {
    if (closed) throw new LogUnavailable(`event log ${options.file} is closed`);
  };

  /**
   * A call some of whose events are already in the log: all of them is a client's retry, answered
   * with the stored records whatever `expected` says; some of them is a caller's bug.
   */
  const storedOr = (stream: string, events: readonly NewEvent[], last: number | null, otherwise: unknown): AppendResult => {
    const known = events.map((event) => statements.byId.get(event.id) as Row | undefined);
    const count = known.filter((row) => row !== undefined).length;
    if (count > 0 && count === events.length) {
      const records = (known as Row[]).map(toRecord);
      return { nextRevision: last ?? (records.at(-1)?.revision ?? -1), records };
    }
    if (count > 0) throw new Error(`append to ${stream}: ${count} of ${events.length} event ids are already in the log`);
    throw otherwise;
  };

  /** A part of a call, checked and turned into rows, not yet inserted. */
  interface Planned {
    readonly part: StreamAppend;
    readonly last: number | null;
    readonly rows: readonly InsertRow[];
  }

  /**
   * Runs inside the group transaction and writes all the parts' rows at once (sqlite-insert.ts), so
   * a call that throws leaves nothing behind. Known ids are looked up only when
   * the expected revision or the insert fails: a retry either meets a moved stream or the unique id
   * index. A part whose events are all in the log already (a retry) is answered with them.
   */
  const appendParts = (parts: readonly StreamAppend[]): AppendResult[] => {
    const now = clock();
    // Offsets are staged per call and merged only once the insert succeeded; revisions too, so two
    // parts on one stream follow each other.
    const callOffsets = new Map<string, number>();
    const callRevisions = new Map<string, number | null>();
    const outcomes = parts.map((part): Planned | AppendResult => {
      const { stream, events, expected } = part;
      const last = callRevisions.has(stream) ? (callRevisions.get(stream) as number | null) : lastRevision(stream);
      if (!holds(expected, last)) return storedOr(stream, events, last, new WrongExpectedRevision(stream, expected, last ?? 'no_stream'));
      const first = (last ?? -1) + 1;
      if (events.length > 0) callRevisions.set(stream, first + events.length - 1);
      const rows = events.map((event, i): InsertRow => {
        let offset: number | null = null;
        if (isPublicEventType(event.type)) {
          offset = Math.max(now, (callOffsets.get(event.workspaceId) ?? lastOffset(event.workspaceId)) + 1);
          callOffsets.set(event.workspaceId, offset);
        }
        return [event.id, stream, first + i, event.workspaceId, event.type, JSON.stringify(event.data), metadataText(event.metadata), offset];
      });
      return { part, last, rows };
    });
    const planned = outcomes.filter((outcome): outcome is Planned => 'part' in outcome);
    const rows = planned.flatMap((p) => p.rows);
    let lastPosition = 0;
    if (rows.length > 0) {
      try {
        lastPosition = insert(rows);
      } catch (error) {
        if (!isKnownId(error)) throw error;
        // Nothing was written: every part with events must then be a retry of events all in the log.
        return outcomes.map((outcome) => {
          if (!('part' in outcome)) return outcome;
          const { part, last } = outcome;
          return part.events.length === 0 ? { nextRevision: last ?? -1, records: [] } : storedOr(part.stream, part.events, last, error);
        });
      }
    }
    callOffsets.forEach((offset, ws) => stagedOffsets.set(ws, offset));
    callRevisions.forEach((revision, stream) => revisions.set(stream, revision));
    // AUTOINCREMENT gives the rows of one transaction consecutive positions, in the order inserted.
    let position = lastPosition - rows.length;
    return outcomes.map((outcome) => {
      if (!('part' in outcome)) return outcome;
      const { part, last } = outcome;
      const first = (last ?? -1) + 1;
      const records = part.events.map((event, i): RecordedEvent => ({
        id: event.id,
        type: event.type,
        workspaceId: event.workspaceId,
        data: event.data,
        metadata: event.metadata ?? {},
        stream: part.stream,
        revision: first + i,
        position: (position += 1),
        offset: (outcome.rows[i] as InsertRow)[7],
      }));
      return { nextRevision: first + part.events.length - 1, records };
    });
  };

  // The head is read before the page: the page's snapshot is the same or later, so it holds every
  // matching event up to that head even when another process commits in between.
  const pageOf = <T extends { readonly position: number }>(read: (after: number) => T[]) => (after: number): Page<T> => {
    const head = headNow();
    const events = read(after);
    const full = events.length === pageSize;
    return { events, scannedTo: full ? (events.at(-1) as T).position : head };
  };
  const readPage = (filter: Pick<ReadAllOptions, 'types' | 'workspaceId'>) => pageOf((after) => reads.all({ ...filter, after, limit: pageSize }).map(toRecord));
  /**
   * Position, workspace and offset of each public event, without its data: watchFeed's handler
   * needs no more, and parsing every public event's data for it doubled what the main thread of a
   * busy API server parsed.
   */
  const readFeedMarks = pageOf((after) =>
    (statements.feedMarks.all(after, pageSize) as [number, string, number][]).map(([position, workspaceId, offset]) => ({ position, workspaceId, offset })),
  );

  /** A subscribeLoop over `page` that also hears other processes' commits, and is stopped at close. */
  const follow = <T extends { readonly position: number }>(
    after: number,
    page: (after: number) => Page<T>,
    handler: (event: T) => Promise<void> | void,
    scanned?: (position: number) => void,
  ): LogSubscription => {
    const unlisten = foreign?.listen();
    const subscription = subscribeLoop(after, page, commits, handler, scanned);
    subscriptions.add(subscription);
    const forget = (): void => {
      subscriptions.delete(subscription);
      unlisten?.();
    };
    void subscription.done.then(forget, forget);
    return subscription;
  };

  const subscribe: EventLog['subscribe'] = (options, handler) => {
    ensureOpen();
    const { after, scanned, ...filter } = options;
    return follow(after, readPage(filter), handler, scanned);
  };

  return {
    append: async (stream, events, expected) => {
      ensureOpen();
      if (deleting.size > 0) await afterDeletionOf([stream]);
      return writer.submit(() => appendParts([{ stream, events, expected }])[0] as AppendResult);
    },
    appendAll: async (parts) => {
      ensureOpen();
      if (deleting.size > 0) await afterDeletionOf(parts.map((part) => part.stream));
      return writer.submit(() => appendParts(parts));
    },
    readStream: async (stream, fromRevision = 0) => {
      ensureOpen();
      return (statements.stream.all(stream, fromRevision) as Row[]).map(toRecord);
    },
    lastRevision: async (stream) => {
      ensureOpen();
      return (statements.lastRevision.get(stream) as number | null) ?? null;
    },
    readAll: async (options) => {
      ensureOpen();
      return reads.all(options).map(toRecord);
    },
    readFeed: async (query) => {
      ensureOpen();
      return reads.feed(query).map(toRecord);
    },
    subscribe,
    reportsScanned: true,
    // Offsets are assigned in the committing transaction, so a public event is in the feed (and
    // carries its offset) by the time the tail, started at the head of now, meets it.
    watchFeed: async (handler) => {
      ensureOpen();
      return follow(headNow(), readFeedMarks, (mark) => handler(mark.workspaceId, mark.offset));
    },
    // Through the writer, so it begins in call order relative to appends already submitted; this
    // connection's appends to the stream called meanwhile wait until it ends. A batch a transaction,
    // newest first: other writes commit between batches, and a reader (or a crash) meets an earlier
    // state of the stream, never one with a gap. It ends with the batch that finds the stream empty,
    // so what another connection appended meanwhile goes too, and the next append is revision 0.
    deleteStream: async (stream) => {
      ensureOpen();
      const deleteNewest = (): number => {
        revisions.delete(stream);
        return statements.deleteNewest.run(stream, deleteBatch).changes;
      };
      const untilEmpty = async (): Promise<void> => {
        for (;;) {
          // A close stops it between batches: what remains is an earlier state of the stream.
          ensureOpen();
          if ((await writer.submit(deleteNewest)) < deleteBatch) return;
          await sleep(DELETE_PAUSE_MS);
        }
      };
      const before = deleting.get(stream);
      const deletion = before === undefined ? untilEmpty() : before.catch(() => undefined).then(untilEmpty);
      deleting.set(stream, deletion);
      try {
        await deletion;
      } finally {
        if (deleting.get(stream) === deletion) deleting.delete(stream);
      }
    },
    headPosition: async () => {
      ensureOpen();
      return headNow();
    },
    // synchronous: 2 is FULL, 1 NORMAL.
    stats: () => ({ ...writer.stats, durability: db.pragma('synchronous', { simple: true }) === 2 ? 'full' : 'relaxed' }),
    exportPages: (query) => {
      ensureOpen();
      return exportPages(query);
    },
    close: async () => {
      if (closed) return;
      closed = true;
      await writer.drain();
      // Each stops at its next batch (LogUnavailable to its caller).
      await Promise.allSettled(deleting.values());
      await Promise.all([...subscriptions].map((subscription) => subscription.stop()));
      channel?.close();
      await checkpointer?.stop();
      db.close();
    },
  };
};
