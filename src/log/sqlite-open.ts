// Opens the SQLite file behind the event log, or refuses with LogUnavailable. A file that is not ours
// is recognised before anything is written to it, so a wrong path never damages someone's data.
import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { LogUnavailable } from './event-log.js';

/** "SPL1" big-endian: the PRAGMA application_id that marks a file as this log. */
export const APPLICATION_ID = 0x53504c31;
export const SCHEMA_VERSION = 2;

/**
 * Reads filtered by type find their events through it (sqlite-rows.ts): the read models of rare
 * types (workspaces, keys, webhooks, articles) catch up at start without reading the whole log.
 * Created on logs made before it, once, at open.
 */
const TYPE_INDEX = 'CREATE INDEX IF NOT EXISTS events_type ON events (type, position)';

/**
 * `position` is AUTOINCREMENT so positions are never reused after the tail is deleted (a cursor past
 * a deleted event must not skip a later one). `workspace_offsets` keeps each workspace's last offset
 * for the same reason: offsets keep increasing after the events that carried them are gone.
 * `metadata` is NULL when empty (version 2; version 1 stored '{}').
 */
export const SCHEMA = `
CREATE TABLE events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  stream TEXT NOT NULL,
  revision INTEGER NOT NULL,
  workspace_id TEXT NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  metadata TEXT,
  feed_offset INTEGER,
  UNIQUE (stream, revision)
);
CREATE INDEX events_feed ON events (workspace_id, feed_offset) WHERE feed_offset IS NOT NULL;
${TYPE_INDEX};
CREATE TABLE workspace_offsets (
  workspace_id TEXT PRIMARY KEY,
  last_offset INTEGER NOT NULL
) WITHOUT ROWID;
`;

const reasonFor = (error: unknown): string => {
  const code = (error as { code?: unknown }).code;
  switch (code) {
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED':
      return 'it is in use by another process';
    case 'SQLITE_NOTADB':
    case 'SQLITE_CORRUPT':
      return 'the file is not an event log database (corrupt or foreign file)';
    case 'SQLITE_CANTOPEN':
    case 'SQLITE_READONLY':
    case 'SQLITE_READONLY_DIRECTORY':
    case 'SQLITE_PERM':
      return 'the file or its folder cannot be written (missing or read-only folder?)';
    default:
      return error instanceof Error ? error.message : String(error);
  }
};

const refuse = (file: string, reason: string, cause?: unknown): LogUnavailable =>
  new LogUnavailable(`cannot open event log ${file}: ${reason}`, { cause });

/** Throws a reason when the (possibly brand-new, empty) database is not this log at this version. */
const checkIdentity = (db: Database.Database): 'new' | 'ours' => {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  if (applicationId === APPLICATION_ID) {
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version !== SCHEMA_VERSION) throw new Error(`schema version ${version} is not supported (expected ${SCHEMA_VERSION})`);
    return 'ours';
  }
  const objects = db.prepare('SELECT count(*) FROM sqlite_master').pluck().get() as number;
  if (applicationId !== 0 || objects > 0) throw new Error('the file is a database of another application');
  return 'new';
};

/** The WAL's size, in pages, at which a connection checkpoints in its own commit (about 64 MB). */
export const WAL_AUTOCHECKPOINT_PAGES = 32_768;

/** Storage settings of a log file (the benchmark's ceiling uses them too). */
export const applyPragmas = (db: Database.Database): void => {
  // Only takes effect on a new file. A commit writes every page it touched, and each event touches
  // a random page of each index: smaller pages mean fewer bytes to fsync per commit.
  db.pragma('page_size = 2048');
  db.pragma('journal_mode = WAL');
  // FULL: every commit fsyncs the WAL, so an acknowledged append survives a crash of the process
  // and of the machine. NORMAL (no fsync until checkpoints) would survive kill -9 as well, the OS
  // holding the written WAL, but lose the last commits on an OS crash or power loss. Measured: NORMAL
  // appends up to ~1.5x faster from 64 concurrent writers (commits wait on fsync), a few % from 256.
  db.pragma('synchronous = FULL');
  // This connection's own checkpoint every ~64 MB of WAL rather than every 1000 pages: index pages
  // that many commits dirtied are copied to the database once (the append rate measured 10-20% above
  // 16 MB's). A connection whose commits answer requests leaves them to a thread (sqlite.ts,
  // src/shared/wal-checkpointer.ts) long before that: this one then only bounds the WAL.
  db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_PAGES}`);
  db.pragma('cache_size = -32768');
};

export interface OpenMode {
  /** Several processes of this host use the file; otherwise this connection alone (exclusive lock). */
  readonly shared: boolean;
  /** Shared mode: how long a statement waits for another process's lock before SQLITE_BUSY. */
  readonly busyTimeoutMs: number;
  /**
   * `full` (default): every commit is fsynced. `relaxed`: this connection's commits are not (synchronous
   * NORMAL), for a writer whose records no client was told of (the delivery engine's bookkeeping):
   * the WAL is one file, so the next fsynced commit of any connection, or a checkpoint, makes them
   * durable with it. They survive a killed process; an OS crash may lose the last of them, never
   * what came before an fsynced commit.
   */
  readonly durability?: 'full' | 'relaxed';
}

/** Shared mode: an open keeps trying a busy set-up for this many busy timeouts. */
const SET_UP_WAIT_FACTOR = 3;

/** Checks the file is this log, applies the pragmas and creates what is missing; may be run again. */
const setUp = (db: Database.Database, mode: OpenMode): void => {
  // Checked before the pragmas write anything, so a foreign file stays untouched. In one read
  // transaction: its two reads must see one state of the file, not another process's schema
  // creation between them (application id still 0, tables already there: "another application").
  db.transaction(() => checkIdentity(db))();
  applyPragmas(db);
  if (mode.durability === 'relaxed') db.pragma('synchronous = NORMAL');
  // A write now takes the exclusive lock in embedded mode, also when the log already exists. The
  // identity is checked again under the write lock: another process may have created the schema.
  db.transaction(() => {
    if (checkIdentity(db) === 'ours') return void db.exec(TYPE_INDEX);
    db.exec(SCHEMA);
    db.pragma(`application_id = ${APPLICATION_ID}`);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
};

/**
 * Embedded mode: exclusive locking mode, set before the first WAL access, keeps the WAL index in
 * process memory and holds an OS lock on the file from the first write until close: a second process
 * (or connection) gets SQLITE_BUSY at once, and a killed process releases the lock with its file
 * descriptors. Shared mode: normal locking (WAL index in the -shm file), so readers never block and
 * writers queue behind each other's BEGIN IMMEDIATE for up to the busy timeout. Either mode waits
 * out the other's lock, then refuses.
 */
export const openLogDatabase = (file: string, mode: OpenMode): Database.Database => {
  const folder = dirname(file);
  try {
    // The WAL file is created beside the log: the folder must be writable even when the log exists.
    accessSync(folder, constants.W_OK | constants.X_OK);
  } catch (error) {
    const missing = (error as { code?: unknown }).code === 'ENOENT';
    throw refuse(file, missing ? `the folder ${folder} does not exist` : `the folder ${folder} is not writable`, error);
  }
  let db: Database.Database;
  try {
    db = new Database(file, { timeout: mode.shared ? mode.busyTimeoutMs : 0 });
  } catch (error) {
    throw refuse(file, reasonFor(error), error);
  }
  try {
    if (!mode.shared) db.pragma('locking_mode = EXCLUSIVE');
    for (const began = Date.now(); ; ) {
      try {
        setUp(db, mode);
        return db;
      } catch (error) {
        // Shared mode: processes started together on a fresh file set it up in turns, and one was seen
        // refused busy there (two API servers starting at once on a loaded machine). Every step can
        // be run again.
        if (!mode.shared || (error as { code?: unknown }).code !== 'SQLITE_BUSY' || Date.now() - began > SET_UP_WAIT_FACTOR * mode.busyTimeoutMs) throw error;
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20 + Math.random() * 30);
      }
    }
  } catch (error) {
    db.close();
    const code = (error as { code?: unknown }).code;
    throw refuse(file, typeof code === 'string' ? reasonFor(error) : (error as Error).message, error);
  }
};
