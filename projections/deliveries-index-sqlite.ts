// The delivery-history index in SQLite, in its own file beside the log (DATA_DIR/delivery-history.sqlite).
// In the embedded mode the dispatcher thread writes it (openSqliteDeliveryIndex: a projection runner
// applies the delivery records it reads back from the log) and the API thread reads it on a second
// connection (openSqliteDeliveryHistory): WAL lets one writer and any readers work at once, so a page
// read never waits for delivery work and delivery work never runs on the API's event loop.
//
// Layout. `deliveries` holds one row per delivery, in the order they were scheduled (the rowid, so a
// new row is appended rather than inserted among a million by its random id), with its id (unique),
// the columns lists filter and sort on, and the delivery as JSON. Each filter combination has its own index ending in
// (created_at, id), the listing order, so a page is a range scan of `limit` entries whatever the
// history's size: (sub), (sub, status), (sub, event_type), (sub, status, event_type). The others
// serve the restart (waiting ones: a partial index; those of events after the fan-out checkpoint)
// and retention (created_at). `meta` has the checkpoint: the log position applied and the fan-out
// checkpoint, committed in the transaction of the rows they cover; `streams` the last record applied
// of each subscription's delivery stream, so its waiting deliveries come with the revision they are as of.
//
// Versions. user_version is DELIVERY_INDEX_VERSION: a file of a version that MIGRATIONS takes forward
// is brought up to date in place, any other is emptied and rebuilt from the log (a minute a million
// deliveries, before the service listens). A file that is not ours is refused. Nothing here needs an
// fsync: the log is durable, this file is rebuilt from it (synchronous=NORMAL never leaves half a commit).
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { ProjectionReset } from '../src/app/projection-runner.js';
import type { Delivery, DeliveryStatus } from '../src/domain/delivery/delivery.js';
import { batchedWrites } from './sqlite-batched-writes.js';
import {
  DELIVERY_INDEX_VERSION,
  indexChange,
  noDeliveries,
  NOTHING_APPLIED,
  type AppliedRecord,
  type DeliveryHistoryReader,
  type DeliveryIndex,
  type HistoryQuery,
  type IndexCheckpoint,
  type IndexedDelivery,
  type PendingDeliveries,
  type PendingPages,
  type WaitingReader,
} from './deliveries-index.js';

/** The file's name in DATA_DIR. */
export const DELIVERY_HISTORY_FILE = 'delivery-history.sqlite';
/** "SPDH" big-endian: marks a file as this index. */
const APPLICATION_ID = 0x53504448;
/** Deliveries written per transaction at most (a packed record holds many). */
const BATCH = 5_000;
/**
 * An open transaction commits this long after its first write, not at every macrotask: pages of the
 * history show that much later, and a delivery's steps (scheduled, attempted) mostly land in one
 * commit, which writes its row once (see `staged`), and the pages a live history touches over and
 * over (each index's newest entries) are written once per commit. 100 ms rather than 50 costs the
 * index thread about a fifth less CPU per delivery.
 */
export const COMMIT_AFTER_MS = 100;
/**
 * WAL pages before a checkpoint copies them into the file (SQLite's default is 1,000): a page
 * rewritten by many commits in between is copied once, and the checkpoint's fsyncs come a tenth as
 * often. The WAL is cut back to WAL_LIMIT_BYTES after each checkpoint.
 */
const WAL_CHECKPOINT_PAGES = 10_000;
const WAL_LIMIT_BYTES = 64 * 1024 * 1024;
/**
 * A deleted subscription's deliveries go this many a transaction, with a pause between: one statement
 * over 900,000 held the index thread 4.7 s, every other subscription's history standing still
 * (`npm run bench -- history-forget --long`).
 */
const FORGET_BATCH = 1_000;
const FORGET_PAUSE_MS = 10;

const STREAMS = 'CREATE TABLE streams (sub TEXT PRIMARY KEY, revision INTEGER NOT NULL, position INTEGER NOT NULL, workspace TEXT NOT NULL) WITHOUT ROWID;';

const SCHEMA = `
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), position INTEGER NOT NULL, fanned_out_through INTEGER NOT NULL);
INSERT INTO meta VALUES (1, 0, 0);
CREATE TABLE deliveries (
  ord INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  sub TEXT NOT NULL,
  workspace TEXT NOT NULL,
  status TEXT NOT NULL,
  event_type TEXT NOT NULL,
  event_position INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  replay TEXT,
  attempted INTEGER NOT NULL DEFAULT 0,
  json TEXT NOT NULL
);
${STREAMS}
CREATE INDEX d_sub ON deliveries (sub, created_at, id);
CREATE INDEX d_sub_status ON deliveries (sub, status, created_at, id);
CREATE INDEX d_sub_type ON deliveries (sub, event_type, created_at, id);
CREATE INDEX d_sub_status_type ON deliveries (sub, status, event_type, created_at, id);
CREATE INDEX d_created ON deliveries (created_at);
CREATE INDEX d_waiting ON deliveries (status) WHERE status = 'waiting';
CREATE INDEX d_event_position ON deliveries (event_position);
CREATE INDEX d_replay ON deliveries (replay, sub, status, attempted) WHERE replay IS NOT NULL;
`;

/**
 * What takes a file of an older version to the next one, by the version it has. Version 3 added
 * `streams`: empty at first and right so, since the rows already reflect every record applied; a
 * subscription's entry comes with the next record of its stream applied, and until then a dispatcher
 * reads that stream from its first record, as version 2's release did. (The Redis index is rebuilt
 * instead: dispatchers of both releases may apply it at once during an upgrade.)
 */
const MIGRATIONS: Readonly<Record<number, string>> = { 2: STREAMS };

/** The file cannot be used as the index (another application's database, or not a database). */
export class DeliveryIndexUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DeliveryIndexUnavailable';
  }
}

/** Creates the schema on a new file, brings one of an older version forward where MIGRATIONS can, empties one of any other version, refuses anything else. */
const prepareFile = (db: Database.Database, file: string): void => {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  if (applicationId === APPLICATION_ID) {
    const stored = db.pragma('user_version', { simple: true }) as number;
    let version = stored;
    for (; version < DELIVERY_INDEX_VERSION && MIGRATIONS[version] !== undefined; version++) db.exec(MIGRATIONS[version] as string);
    if (version === DELIVERY_INDEX_VERSION) {
      if (version !== stored) db.pragma(`user_version = ${version}`);
      return;
    }
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[];
    for (const table of tables) db.exec(`DROP TABLE "${table}"`);
  } else if (applicationId !== 0 || (db.prepare('SELECT count(*) FROM sqlite_master').pluck().get() as number) > 0) {
    throw new DeliveryIndexUnavailable(`${file} is a database of another application; move it away (the delivery history index is rebuilt from the log)`);
  }
  db.exec(SCHEMA);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma(`user_version = ${DELIVERY_INDEX_VERSION}`);
};

/** The index as the file has it: also what a restarting dispatcher takes over, read on any connection. */
export interface SqliteDeliveryHistory extends DeliveryHistoryReader, WaitingReader {
  /** The waiting deliveries and those past the fan-out checkpoint, as of the last commit. */
  pending(): Promise<PendingDeliveries>;
  /**
   * The same, read a page at a time as they are iterated (a restart's take-over, which a backlog of
   * millions would otherwise hold in memory at once). Each page is a read of its own: a delivery
   * settled meanwhile may be left out, none still waiting is (rows keep their place when updated).
   */
  pendingPages(pageSize: number): Promise<PendingPages>;
}

/** The writer: also commits its open transaction on demand (a reader on another connection sees it then). */
export interface SqliteDeliveryIndex extends DeliveryIndex {
  commit(): void;
}

interface Row {
  readonly json: string;
  readonly workspace: string;
}

const deliveryOf = (json: string): Delivery => JSON.parse(json) as Delivery;

/** The index that serves each filter combination, named so the planner cannot pick a worse one. */
const indexFor = (query: HistoryQuery): string =>
  query.status === undefined ? (query.eventType === undefined ? 'd_sub' : 'd_sub_type') : query.eventType === undefined ? 'd_sub_status' : 'd_sub_status_type';

/** Page and get, on either connection. */
const historyReads = (db: Database.Database): Omit<SqliteDeliveryHistory, 'close'> => {
  const statements = new Map<string, Database.Statement>();
  const prepared = (sql: string): Database.Statement => {
    let statement = statements.get(sql);
    if (statement === undefined) statements.set(sql, (statement = db.prepare(sql)));
    return statement;
  };
  return {
    async page(query) {
      const conditions = ['sub = ?'];
      const params: (string | number)[] = [query.subscriptionId];
      const add = (condition: string, ...values: (string | number)[]) => {
        conditions.push(condition);
        params.push(...values);
      };
      if (query.status !== undefined) add('status = ?', query.status);
      if (query.eventType !== undefined) add('event_type = ?', query.eventType);
      if (query.createdFrom !== undefined) add('created_at >= ?', query.createdFrom);
      if (query.createdBefore !== undefined) add('created_at < ?', query.createdBefore);
      if (query.after !== undefined) add('(created_at, id) < (?, ?)', query.after.createdAt, query.after.id);
      const sql = `SELECT json FROM deliveries INDEXED BY ${indexFor(query)} WHERE ${conditions.join(' AND ')} ORDER BY created_at DESC, id DESC LIMIT ?`;
      // One more than asked: whether a next page exists, without counting.
      const rows = prepared(sql).pluck().all(...params, query.limit + 1) as string[];
      const items = rows.slice(0, query.limit).map(deliveryOf);
      const last = items.at(-1);
      return { items, next: rows.length > query.limit && last !== undefined ? { createdAt: last.createdAt, id: last.id } : null };
    },
    async get(subscriptionId, deliveryId) {
      // One read transaction: the row and the checkpoint of the same commit.
      const read = db.transaction(() => {
        const json = prepared('SELECT json FROM deliveries WHERE id = ? AND sub = ?').pluck().get(deliveryId, subscriptionId) as string | undefined;
        const position = prepared('SELECT position FROM meta').pluck().get() as number;
        return json === undefined ? undefined : { delivery: deliveryOf(json), position };
      });
      return read.deferred();
    },
    async waitingOf(subscriptionId) {
      // One read transaction: the rows as of the stream record read with them.
      const read = db.transaction(() => {
        const last = prepared('SELECT revision, position, workspace FROM streams WHERE sub = ?').get(subscriptionId) as { revision: number; position: number; workspace: string } | undefined;
        if (last === undefined) return NOTHING_APPLIED;
        const rows = prepared("SELECT json FROM deliveries INDEXED BY d_sub_status WHERE sub = ? AND status = 'waiting'").pluck().all(subscriptionId) as string[];
        return { deliveries: rows.map(deliveryOf), workspaceId: last.workspace, revision: last.revision, position: last.position };
      });
      return read.deferred();
    },
    async replayFirsts(subscriptionId, replayId) {
      // One read transaction: the rows and the checkpoint of the same commit.
      const read = db.transaction(() => {
        const sql = "SELECT json FROM deliveries INDEXED BY d_replay WHERE replay = ? AND sub = ? AND status = 'waiting' AND attempted = 0";
        const rows = prepared(sql).pluck().all(replayId, subscriptionId) as string[];
        return { deliveries: rows.map(deliveryOf), position: prepared('SELECT position FROM meta').pluck().get() as number };
      });
      return read.deferred();
    },
    async appliedOf(subscriptionId) {
      const read = db.transaction(() => ({
        revision: (prepared('SELECT revision FROM streams WHERE sub = ?').pluck().get(subscriptionId) as number | undefined) ?? -1,
        waiting: prepared("SELECT count(*) FROM deliveries INDEXED BY d_sub_status WHERE sub = ? AND status = 'waiting'").pluck().get(subscriptionId) as number,
      }));
      return read.deferred();
    },
    async replayOutcomes(subscriptionId, replayId) {
      const counts = noDeliveries();
      const sql = 'SELECT status, attempted, count(*) AS n FROM deliveries INDEXED BY d_replay WHERE replay = ? AND sub = ? GROUP BY status, attempted';
      const rows = prepared(sql).all(replayId, subscriptionId) as { status: DeliveryStatus; attempted: number; n: number }[];
      for (const { status, attempted, n } of rows) {
        counts[status] += n;
        counts.attempted += attempted * n;
      }
      return counts;
    },
    async pending() {
      // One read transaction: the rows as of the checkpoint read with them.
      const read = db.transaction(() => {
        const { fannedOutThrough } = prepared('SELECT fanned_out_through AS fannedOutThrough FROM meta').get() as { fannedOutThrough: number };
        const sql = "SELECT json, workspace FROM deliveries WHERE status = 'waiting' UNION SELECT json, workspace FROM deliveries WHERE event_position > ?";
        const rows = prepared(sql).all(fannedOutThrough) as Row[];
        return { deliveries: rows.map((row) => ({ delivery: deliveryOf(row.json), workspaceId: row.workspace })), fannedOutThrough };
      });
      return read.deferred();
    },
    async pendingPages(pageSize) {
      const { fannedOutThrough } = prepared('SELECT fanned_out_through AS fannedOutThrough FROM meta').get() as { fannedOutThrough: number };
      const indexed = (row: Row): IndexedDelivery => ({ delivery: deliveryOf(row.json), workspaceId: row.workspace });
      async function* deliveries(): AsyncGenerator<IndexedDelivery> {
        // Past the checkpoint and settled: as many as the fan-out was behind, read at once.
        const past = prepared("SELECT json, workspace FROM deliveries INDEXED BY d_event_position WHERE event_position > ? AND status != 'waiting'").all(fannedOutThrough) as Row[];
        yield* past.map(indexed);
        const page = prepared("SELECT ord, json, workspace FROM deliveries INDEXED BY d_waiting WHERE status = 'waiting' AND ord > ? ORDER BY ord LIMIT ?");
        for (let after = 0; ; ) {
          const rows = page.all(after, pageSize) as (Row & { readonly ord: number })[];
          yield* rows.map(indexed);
          if (rows.length < pageSize) return;
          after = (rows.at(-1) as { readonly ord: number }).ord;
        }
      }
      return { deliveries: deliveries(), fannedOutThrough };
    },
  };
};

const open = (file: string, configure: (db: Database.Database) => void): Database.Database => {
  let db: Database.Database;
  try {
    db = new Database(file, { timeout: 5_000 });
  } catch (error) {
    throw new DeliveryIndexUnavailable(`cannot open the delivery history index ${file}: ${(error as Error).message}`, { cause: error });
  }
  try {
    configure(db);
    return db;
  } catch (error) {
    db.close();
    throw error instanceof DeliveryIndexUnavailable ? error : new DeliveryIndexUnavailable(`cannot open the delivery history index ${file}: ${(error as Error).message}`, { cause: error });
  }
};

/** The writer: one per file (the embedded dispatcher thread). */
export const openSqliteDeliveryIndex = (options: { readonly file: string; readonly batch?: number }): SqliteDeliveryIndex => {
  const db = open(options.file, (db) => {
    db.pragma('journal_mode = WAL');
    db.transaction(() => prepareFile(db, options.file)).immediate();
    db.pragma('synchronous = NORMAL');
    db.pragma(`wal_autocheckpoint = ${WAL_CHECKPOINT_PAGES}`);
    db.pragma(`journal_size_limit = ${WAL_LIMIT_BYTES}`);
  });
  const reads = historyReads(db);
  const select = db.prepare('SELECT json FROM deliveries WHERE id = ?').pluck();
  const upsert = db.prepare(
    `INSERT INTO deliveries (id, sub, workspace, status, event_type, event_position, created_at, replay, attempted, json)
     VALUES (@id, @sub, @workspace, @status, @eventType, @eventPosition, @createdAt, @replay, @attempted, @json)
     ON CONFLICT (id) DO UPDATE SET status = excluded.status, attempted = excluded.attempted, json = excluded.json`,
  );
  const saveApplied = db.prepare(
    'INSERT INTO streams (sub, revision, position, workspace) VALUES (@subscriptionId, @revision, @position, @workspaceId) ON CONFLICT (sub) DO UPDATE SET revision = excluded.revision, position = excluded.position',
  );
  const forgetSome = db.prepare('DELETE FROM deliveries WHERE ord IN (SELECT ord FROM deliveries WHERE sub = ? LIMIT ?)');
  const forgetApplied = db.prepare('DELETE FROM streams WHERE sub = ?');
  const subscriptionsOf = db.prepare('SELECT id, sub FROM deliveries WHERE id IN (SELECT value FROM json_each(?))').raw();
  const readMeta = db.prepare('SELECT position, fanned_out_through AS fannedOutThrough FROM meta');
  const saveMeta = db.prepare('UPDATE meta SET position = ?, fanned_out_through = ?');
  let checkpoint = readMeta.get() as IndexCheckpoint;
  let closed = false;
  /**
   * Deliveries changed since the last commit, written at the commit in their last state: one
   * scheduled and settled within a commit's wait costs one row write, not two (each row write
   * updates every index of the table).
   */
  const staged = new Map<string, IndexedDelivery>();
  /** The last stream record applied per subscription since the last commit, written with it. */
  const stagedApplied = new Map<string, AppliedRecord>();

  const put = ({ delivery, workspaceId }: IndexedDelivery): void => {
    upsert.run({
      id: delivery.id,
      sub: delivery.subscriptionId,
      workspace: workspaceId,
      status: delivery.status,
      eventType: delivery.eventType,
      eventPosition: delivery.eventPosition,
      createdAt: delivery.createdAt,
      replay: delivery.replayId,
      attempted: delivery.history.length > 0 ? 1 : 0,
      json: JSON.stringify(delivery),
    });
  };
  const flush = (): void => {
    staged.forEach(put);
    staged.clear();
    stagedApplied.forEach((applied) => saveApplied.run(applied));
    stagedApplied.clear();
  };

  // The checkpoint is committed with the rows it covers; a failed write resumes from the committed one.
  const writes = batchedWrites(db, {
    batch: options.batch ?? BATCH,
    commitAfterMs: COMMIT_AFTER_MS,
    beforeCommit() {
      flush();
      saveMeta.run(checkpoint.position, checkpoint.fannedOutThrough);
    },
    failed(error) {
      staged.clear();
      stagedApplied.clear();
      checkpoint = readMeta.get() as IndexCheckpoint;
      console.error(`delivery history index ${options.file}: a write failed, resuming from the last commit:`, error);
      return new ProjectionReset(`delivery history index: a write failed (${(error as Error).message}); resuming from the last commit`, { cause: error });
    },
  });
  const { commit } = writes;
  const write = (run: () => void): void => {
    if (closed) throw new ProjectionReset('delivery history index: closed');
    writes.write(run);
  };

  /** Subscriptions whose deliveries are still going, a batch a commit, and when each is done. */
  const forgetting = new Map<string, Promise<void>>();
  const forgetRest = (subscriptionId: string): void => {
    if (forgetting.has(subscriptionId)) return;
    const rest = (async () => {
      for (let deleted = FORGET_BATCH; deleted === FORGET_BATCH; ) {
        commit();
        await sleep(FORGET_PAUSE_MS);
        // What is left after a close goes at the next start (the restart's waiting ones) or with the retention.
        if (closed) return;
        write(() => {
          deleted = forgetSome.run(subscriptionId, FORGET_BATCH).changes;
        });
      }
      commit();
    })()
      .catch((error: unknown) => console.error(`delivery history index ${options.file}: forgetting subscription ${subscriptionId}:`, error))
      .finally(() => forgetting.delete(subscriptionId));
    forgetting.set(subscriptionId, rest);
  };
  /** Its first batch in the open transaction, the rest in commits of their own. */
  const forgetSubscription = (subscriptionId: string): void => {
    for (const [id, indexed] of staged) if (indexed.delivery.subscriptionId === subscriptionId) staged.delete(id);
    stagedApplied.delete(subscriptionId);
    forgetApplied.run(subscriptionId);
    if (forgetSome.run(subscriptionId, FORGET_BATCH).changes === FORGET_BATCH) forgetRest(subscriptionId);
  };
  /** This connection's reads see the staged changes too (in its open transaction). */
  const flushed = (): void => {
    if (staged.size > 0 || stagedApplied.size > 0) write(flush);
  };

  return {
    page(query) {
      flushed();
      return reads.page(query);
    },
    get(subscriptionId, deliveryId) {
      flushed();
      return reads.get(subscriptionId, deliveryId);
    },
    replayOutcomes(subscriptionId, replayId) {
      flushed();
      return reads.replayOutcomes(subscriptionId, replayId);
    },
    waitingOf(subscriptionId) {
      flushed();
      return reads.waitingOf(subscriptionId);
    },
    appliedOf(subscriptionId) {
      flushed();
      return reads.appliedOf(subscriptionId);
    },
    replayFirsts(subscriptionId, replayId) {
      flushed();
      return reads.replayFirsts(subscriptionId, replayId);
    },
    async has(keys) {
      flushed();
      const found = new Map(subscriptionsOf.all(JSON.stringify(keys.map((key) => key.deliveryId))) as [string, string][]);
      return keys.map(({ subscriptionId, deliveryId }) => found.get(deliveryId) === subscriptionId);
    },
    async checkpoint() {
      return checkpoint;
    },
    apply(event) {
      if (event.position <= checkpoint.position) return;
      let written = 1;
      write(() => {
        const change = indexChange(event, (id) => {
          const known = staged.get(id);
          if (known !== undefined) return known.delivery;
          const json = select.get(id) as string | undefined;
          return json === undefined ? undefined : deliveryOf(json);
        });
        let { fannedOutThrough } = checkpoint;
        if (change.kind === 'subscription_deleted') forgetSubscription(change.subscriptionId);
        else {
          change.deliveries.forEach((indexed) => staged.set(indexed.delivery.id, indexed));
          if (change.applied !== null) stagedApplied.set(change.applied.subscriptionId, change.applied);
          written = Math.max(1, change.deliveries.length);
          fannedOutThrough = Math.max(fannedOutThrough, change.fannedOutThrough);
        }
        checkpoint = { position: event.position, fannedOutThrough };
      });
      writes.counted(written);
    },
    pending() {
      commit();
      return reads.pending();
    },
    pendingPages(pageSize) {
      commit();
      return reads.pendingPages(pageSize);
    },
    commit,
    async prune(before, limit) {
      let pruned = 0;
      write(() => {
        // What is staged may be past the retention too (a catch-up of an old history).
        flush();
        pruned = db
          .prepare("DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries INDEXED BY d_created WHERE created_at < ? AND status != 'waiting' AND event_position <= ? ORDER BY created_at LIMIT ?)")
          .run(before, checkpoint.fannedOutThrough, limit).changes;
      });
      commit();
      return pruned;
    },
    async forget(subscriptionId) {
      write(() => forgetSubscription(subscriptionId));
      await forgetting.get(subscriptionId);
    },
    async clear() {
      write(() => {
        staged.clear();
        stagedApplied.clear();
        db.exec('DELETE FROM deliveries; DELETE FROM streams');
        checkpoint = { position: 0, fannedOutThrough: 0 };
      });
      commit();
    },
    async close() {
      if (closed) return;
      closed = true;
      commit();
      db.close();
    },
  };
};

/** A reader (the API thread): page and get only, never a write. */
export const openSqliteDeliveryHistory = (options: { readonly file: string }): SqliteDeliveryHistory => {
  const db = open(options.file, (db) => {
    db.pragma('journal_mode = WAL');
    // The writer creates the schema; a reader that comes first creates the same one.
    db.transaction(() => prepareFile(db, options.file)).immediate();
    db.pragma('query_only = ON');
  });
  return {
    ...historyReads(db),
    async close() {
      db.close();
    },
  };
};
