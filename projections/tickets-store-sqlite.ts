// SQLite DocumentStore for the embedded mode: the read models in their own file beside the log
// (DATA_DIR/read-models.sqlite), so that a start resumes each projection from its checkpoint instead
// of replaying the whole log, and the process holds no copy of the documents (SQLite's page cache,
// bounded by cache_size, is all it keeps in memory).
//
// Layout. `stores` has one row per projection name and version: its filter fields and its checkpoint
// (the EventRef of the last event applied, as JSON). Each row owns a table docs_<id>: one row per
// document, `ord` (the rowid) the position of the event that created it, i.e. creation order, `key`,
// `part` (its partition), one column f<i> per filter field (the value when it is a string), `json`.
// Index (part) and one index (part, f<i>) per filter field; SQLite ends each with the rowid, so a list
// of a partition, filtered on one field, reads its page and counts its total in index order without
// touching other partitions. A new version of a projection gets a table of its own, built from the log;
// the lower versions of that name are dropped then, unless this process has them open (one process
// uses this file: no rolling deploy goes on reading them). A store whose filter fields changed without a version bump is rebuilt.
//
// Writes. apply is synchronous: it reads the document, evolves it and writes it in the transaction
// that is open, which every store of the file shares; a commit ends it COMMIT_AFTER_MS after its first
// write, or after BATCH applies. Reads use the same connection and see the writes not committed yet, so a route that
// waited for the runner reads its write. The documents written last are also kept parsed (a rollback
// drops them): a document's next event and the route's read of its write skip a SELECT and a parse. Each commit writes the checkpoints of the stores it covers
// first: the documents and their checkpoint are committed together or not at all, so after a kill -9
// (or a power loss: synchronous=NORMAL loses the last commits, never half of one) the store resumes
// from a checkpoint that matches its documents, and the runner replays the events after it. No fsync
// per commit: the log holds what is durable, this file can always be rebuilt from it.
//
// Failures. A write that fails (disk full, I/O error) rolls the transaction back, for every store of
// the file, which then throws ProjectionReset from apply and tells its onReconnect listeners: the
// runners resume from the committed checkpoints. Meanwhile available() is false (the routes answer
// 503) and checkpoint() refuses for RETRY_MS, so the runners retry once a second, not in a loop.
// A file built from another log (its checkpoint event is not in this one) is cleared and rebuilt by
// the runner (src/tickets/read-models.ts). A file that is not ours (another application's database,
// not a database, or corrupt when opened) is refused with ReadModelsUnavailable naming it: nothing is
// written to it; deleting it is always safe and rebuilds the read models at the next start. A file of
// ours at another schema version is emptied and rebuilt. A lock file beside it (`<file>.lock`, held
// from open until close) refuses a second process on the same folder.
//
// Checkpoints. The connection's own automatic checkpoint runs inside a commit, on the thread that
// applies (the main thread): under load it copied tens of MB and fsynced twice, stopping every
// request for ~200 ms every few seconds. A thread of its own checkpoints instead
// (src/shared/wal-checkpointer.ts), which needs the normal locking mode (the WAL index in the -shm
// file, so its connection can open the file); the automatic checkpoint stays as the bound.
import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { ProjectionReset } from '../src/app/projection-runner.js';
import { createBoundedCache, type BoundedCache } from '../src/shared/bounded-cache.js';
import { holdLockFile, type InstanceLock } from '../src/log/instance-lock.js';
import { walCheckpointerOnDemand } from '../src/shared/wal-checkpointer.js';
import { batchedWrites } from './sqlite-batched-writes.js';
import { StoreUnavailable, type DocumentProjection, type DocumentStore, type DocumentStores, type EventRef, type ListQuery, type Page } from './tickets-store.js';

/** The file's name in DATA_DIR. */
export const READ_MODELS_FILE = 'read-models.sqlite';
/** "SPRM" big-endian: the PRAGMA application_id that marks a file as these read models. */
export const APPLICATION_ID = 0x5350524d;
export const SCHEMA_VERSION = 1;

const SCHEMA = `
CREATE TABLE stores (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  filters TEXT NOT NULL,
  checkpoint TEXT,
  UNIQUE (name, version)
);
`;

/** Applies per transaction at most (a catch-up commits about once per page of the log anyway). */
const BATCH = 5_000;
/**
 * A live tail's transaction commits this long after its first write, not at every macrotask: under
 * load a macrotask carries a few events, and each commit writes again the pages they share (a
 * workspace's list indexes): measured, about 12% fewer bytes written per POST /tickets. Nothing
 * reads this file through another connection, and a crash loses at most these applies, which the
 * runners replay from the checkpoint committed with them.
 */
const COMMIT_AFTER_MS = 20;
/** How long checkpoint() refuses after a failed write, so runners retry once a second. */
const RETRY_MS = 1_000;
/** WAL pages between checkpoints (4 KiB each): the WAL file stays under ~64 MB. */
const WAL_PAGES = 16_384;
/** Page cache per connection, in KiB (negative cache_size): the memory the read models use. */
const CACHE_KIB = 16_384;

/** The read-model file cannot be used (foreign, corrupt, locked, unwritable): the service does not start. */
export class ReadModelsUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReadModelsUnavailable';
  }
}

const reasonFor = (error: unknown): string => {
  switch ((error as { code?: unknown }).code) {
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return 'it is in use by another process';
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return 'the file is not a read-model database (corrupt or foreign file); delete it to rebuild the read models from the log';
    default:
      return error instanceof Error ? error.message : String(error);
  }
};

/** Creates the schema on a new file, empties one of ours at another version, refuses anything else. */
const prepareFile = (db: Database.Database): void => {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  if (applicationId === APPLICATION_ID) {
    if (db.pragma('user_version', { simple: true }) === SCHEMA_VERSION) return;
    // Derived data: a file of another schema version is rebuilt from the log rather than migrated.
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").pluck().all() as string[];
    for (const table of tables) db.exec(`DROP TABLE "${table}"`);
  } else {
    const objects = db.prepare('SELECT count(*) FROM sqlite_master').pluck().get() as number;
    if (applicationId !== 0 || objects > 0) throw new ReadModelsUnavailable('the file is a database of another application; move it away (the read models are rebuilt from the log)');
  }
  db.exec(SCHEMA);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
};

const openDatabase = (file: string): { readonly db: Database.Database; readonly lock: InstanceLock } => {
  const refuse = (reason: string, cause: unknown) => new ReadModelsUnavailable(`cannot open read models ${file}: ${reason}`, { cause });
  try {
    accessSync(dirname(file), constants.W_OK | constants.X_OK);
  } catch (error) {
    throw refuse(`the folder ${dirname(file)} is missing or not writable`, error);
  }
  let lock: InstanceLock;
  try {
    lock = holdLockFile(`${file}.lock`);
  } catch (error) {
    throw refuse(reasonFor(error), error);
  }
  let db: Database.Database;
  try {
    db = new Database(file, { timeout: 0 });
  } catch (error) {
    lock.release();
    throw refuse(reasonFor(error), error);
  }
  try {
    // A read first: a foreign or corrupt file is refused before anything is written to it.
    db.pragma('application_id', { simple: true });
    db.transaction(() => prepareFile(db)).immediate();
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // NORMAL fsyncs at each WAL checkpoint only. The checkpointer thread's come first; this
    // connection's own, every WAL_PAGES pages (not the default 1000: a rebuild of 200k events took
    // twice as long with it, waiting on those fsyncs), bounds the WAL when that thread lags or is gone.
    db.pragma(`wal_autocheckpoint = ${WAL_PAGES}`);
    db.pragma(`journal_size_limit = ${WAL_PAGES * 4096}`);
    db.pragma(`cache_size = -${CACHE_KIB}`);
    return { db, lock };
  } catch (error) {
    db.close();
    lock.release();
    throw error instanceof ReadModelsUnavailable ? refuse(error.message, error) : refuse(reasonFor(error), error);
  }
};

type Projection<D> = Pick<DocumentProjection<D>, 'name' | 'version' | 'filters' | 'partitionOf'>;

/** One projection version's data, shared by every store opened on it. */
interface Table {
  readonly id: number;
  readonly name: string;
  readonly filters: readonly string[];
  /** The checkpoint as this connection sees it (committed or not); null until read from the file. */
  checkpoint: EventRef | null | undefined;
  readonly statements: Map<string, Database.Statement>;
  /** The documents applied last, as written (this connection alone writes the file); emptied by a rollback. */
  readonly recent: BoundedCache<Written>;
}

/** A document as its row holds it: `ord` names the row. */
interface Written {
  readonly ord: number;
  readonly doc: unknown;
}

/**
 * Documents kept parsed per store: the next event of a document just written (a ticket's first
 * message, a contact's tickets) and the route's read of its own write skip a SELECT and a parse.
 */
const RECENT_DOCUMENTS = 1_000;

const refOf = ({ id, position, stream, revision }: EventRef): EventRef => ({ id, position, stream, revision });

const textOrNull = (value: unknown): string | null => (typeof value === 'string' ? value : null);

export interface SqliteDocumentStores extends DocumentStores {
  /** Commits the open transaction now (tests, and close). */
  commit(): void;
  /** Resolves once the checkpointer thread has copied every committed page into the file (tests). */
  checkpointed(): Promise<number>;
}

export const openSqliteDocumentStores = (options: { readonly file: string; readonly batch?: number; readonly checkpointEveryMs?: number }): SqliteDocumentStores => {
  const { db, lock } = openDatabase(options.file);
  // At a quarter of the connection's own threshold, which stays as the bound.
  const checkpointer = walCheckpointerOnDemand(options.file, {
    afterFrames: WAL_PAGES / 4,
    pageBytes: db.pragma('page_size', { simple: true }) as number,
    ...(options.checkpointEveryMs === undefined ? {} : { everyMs: options.checkpointEveryMs }),
  });
  const tables = new Map<string, Table>();
  const dirty = new Set<Table>();
  const listeners: (() => void)[] = [];
  /** Bumped by each rollback: stores bound to an earlier one must read their checkpoint again. */
  let generation = 0;
  let broken: { readonly error: unknown; readonly at: number } | null = null;
  let closed = false;

  const statement = (table: Table, sql: string): Database.Statement => {
    let prepared = table.statements.get(sql);
    if (prepared === undefined) table.statements.set(sql, (prepared = db.prepare(sql.replaceAll('$t', `docs_${table.id}`))));
    return prepared;
  };

  /** Rolls back what is not committed, in every store, and has the runners resume from the file's checkpoints. */
  const failed = (error: unknown): ProjectionReset => {
    dirty.clear();
    for (const table of tables.values()) {
      table.checkpoint = undefined;
      table.recent.clear();
    }
    generation += 1;
    broken = { error, at: Date.now() };
    console.error(`read models ${options.file}: a write failed, resuming from the last commit:`, error);
    setImmediate(() => listeners.forEach((listener) => listener()));
    return new ProjectionReset(`read models: a write failed (${(error as Error).message}); resuming from the last commit`, { cause: error });
  };

  // The transaction every store of the file shares: each commit writes the checkpoints it covers first.
  const { write, counted, commit } = batchedWrites(db, {
    batch: options.batch ?? BATCH,
    commitAfterMs: COMMIT_AFTER_MS,
    beforeCommit() {
      const save = db.prepare('UPDATE stores SET checkpoint = ? WHERE id = ?');
      for (const table of dirty) save.run(table.checkpoint === null ? null : JSON.stringify(table.checkpoint), table.id);
      dirty.clear();
    },
    afterCommit: () => checkpointer.committed(),
    failed,
  });

  const checkpointOf = (table: Table): EventRef | null => {
    if (table.checkpoint === undefined) {
      const json = db.prepare('SELECT checkpoint FROM stores WHERE id = ?').pluck().get(table.id) as string | null;
      table.checkpoint = json === null ? null : (JSON.parse(json) as EventRef);
    }
    return table.checkpoint;
  };

  /** The projection version's table: created when new, rebuilt when its filter fields changed; lower versions dropped. */
  const tableOf = (projection: Projection<unknown>): Table => {
    const name = `${projection.name}\u0000${projection.version}`;
    const known = tables.get(name);
    if (known !== undefined) return known;
    commit();
    const filters = JSON.stringify(projection.filters);
    const id = db.transaction((): number => {
      const drop = (id: number) => {
        db.exec(`DROP TABLE IF EXISTS docs_${id}`);
        db.prepare('DELETE FROM stores WHERE id = ?').run(id);
      };
      const inUse = new Set([...tables.values()].map((table) => table.id));
      const older = db.prepare('SELECT id FROM stores WHERE name = ? AND version < ?').pluck().all(projection.name, projection.version) as number[];
      older.filter((id) => !inUse.has(id)).forEach(drop);
      const found = db.prepare('SELECT id, filters FROM stores WHERE name = ? AND version = ?').get(projection.name, projection.version) as { id: number; filters: string } | undefined;
      if (found !== undefined && found.filters === filters) return found.id;
      if (found !== undefined) drop(found.id);
      const created = Number(db.prepare('INSERT INTO stores (name, version, filters) VALUES (?, ?, ?)').run(projection.name, projection.version, filters).lastInsertRowid);
      const columns = projection.filters.map((_, i) => `f${i} TEXT`).join(', ');
      db.exec(`CREATE TABLE docs_${created} (ord INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, part TEXT NOT NULL, ${columns}${columns === '' ? '' : ', '}json TEXT NOT NULL)`);
      db.exec(`CREATE INDEX docs_${created}_part ON docs_${created} (part)`);
      projection.filters.forEach((_, i) => db.exec(`CREATE INDEX docs_${created}_f${i} ON docs_${created} (part, f${i})`));
      return created;
    }).immediate();
    const table: Table = { id, name: projection.name, filters: projection.filters, checkpoint: undefined, statements: new Map(), recent: createBoundedCache(RECENT_DOCUMENTS) };
    tables.set(name, table);
    return table;
  };

  const open = <D>(projection: Projection<D>): DocumentStore<D> => {
    const table = tableOf(projection as Projection<unknown>);
    const columns = table.filters.map((_, i) => `f${i}`);
    const insert = `INSERT INTO $t (ord, key, part, ${columns.map((c) => `${c}, `).join('')}json) VALUES (?, ?, ?, ${columns.map(() => '?, ').join('')}?)`;
    const update = `UPDATE $t SET part = ?, ${columns.map((c) => `${c} = ?, `).join('')}json = ? WHERE ord = ?`;
    /** The generation this store read its checkpoint in; null before. */
    let bound: number | null = null;

    const read = <T>(run: () => T): T => {
      if (closed) throw new StoreUnavailable(`read model ${table.name}: the store is closed`);
      return run();
    };

    const list = (query: ListQuery): Page<D> => {
      const where = Object.entries(query.where ?? {});
      const conditions = ['part = ?'];
      for (const [field] of where) {
        const i = table.filters.indexOf(field);
        if (i < 0) throw new Error(`read model ${table.name}: lists filter on ${table.filters.join(', ') || 'no field'}, not on ${field}`);
        conditions.push(`f${i} = ?`);
      }
      const params = [query.partition, ...where.map(([, value]) => value)];
      const filter = conditions.join(' AND ');
      const total = statement(table, `SELECT count(*) FROM $t WHERE ${filter}`).pluck().get(...params) as number;
      if (total === 0) return { items: [], total };
      const rows = statement(table, `SELECT json FROM $t WHERE ${filter} ORDER BY ord ${query.newestFirst ? 'DESC' : 'ASC'} LIMIT ? OFFSET ?`)
        .pluck()
        .all(...params, query.pageSize, (query.page - 1) * query.pageSize) as string[];
      return { items: rows.map((json) => JSON.parse(json) as D), total };
    };

    return {
      async checkpoint() {
        if (closed) throw new StoreUnavailable(`read model ${table.name}: the store is closed`);
        if (broken !== null) {
          if (Date.now() - broken.at < RETRY_MS) throw new StoreUnavailable(`read model ${table.name}: the last write failed`, { cause: broken.error });
          broken = null;
        }
        bound = generation;
        return checkpointOf(table);
      },
      get: async (key) =>
        read(() => {
          const recent = table.recent.get(key);
          if (recent !== undefined) return recent.doc as D;
          const json = statement(table, 'SELECT json FROM $t WHERE key = ?').pluck().get(key) as string | undefined;
          return json === undefined ? undefined : (JSON.parse(json) as D);
        }),
      apply(event, key, evolve) {
        if (bound !== generation || closed) throw new ProjectionReset(`read model ${table.name}: not bound to the stored data: read the checkpoint first`);
        // One process applies in log order: a position at or below the checkpoint was applied already.
        if (event.position <= (checkpointOf(table)?.position ?? 0)) return;
        const recent = key === null ? undefined : table.recent.get(key);
        const row =
          recent !== undefined || key === null ? undefined : (write(() => statement(table, 'SELECT ord, json FROM $t WHERE key = ?').get(key)) as { ord: number; json: string } | undefined);
        const ord = recent?.ord ?? row?.ord;
        const before = recent !== undefined ? (recent.doc as D) : row === undefined ? undefined : (JSON.parse(row.json) as D);
        // Outside `write`: a projection that throws stops, as it would with any store.
        const doc = key === null ? undefined : evolve(before);
        write(() => {
          if (doc !== undefined && doc !== before) {
            const values = [projection.partitionOf(doc), ...table.filters.map((field) => textOrNull((doc as Record<string, unknown>)[field])), JSON.stringify(doc)];
            if (ord === undefined) statement(table, insert).run(event.position, key, ...values);
            else statement(table, update).run(...values, ord);
            table.recent.set(key as string, { ord: ord ?? event.position, doc });
          }
          table.checkpoint = refOf(event);
          dirty.add(table);
        });
        counted();
      },
      async clear() {
        write(() => {
          statement(table, 'DELETE FROM $t').run();
          table.recent.clear();
          table.checkpoint = null;
          dirty.add(table);
        });
        commit();
      },
      list: async (query) => read(() => list(query)),
      async dump() {
        return read(() => {
          const rows = statement(table, 'SELECT key, json FROM $t ORDER BY ord').all() as { key: string; json: string }[];
          return new Map(rows.map(({ key, json }) => [key, JSON.parse(json) as D]));
        });
      },
    };
  };

  return {
    open,
    available: () => broken === null && !closed,
    connected: async () => true,
    onReconnect: (listener) => void listeners.push(listener),
    commit,
    checkpointed: () => checkpointer.caughtUp(),
    async close() {
      if (closed) return;
      commit();
      closed = true;
      await checkpointer.stop();
      db.close();
      lock.release();
    },
  };
};
