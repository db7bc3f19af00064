// Opens the SQLite file behind the event log, or refuses with LogUnavailable. A file that is not ours
// is recognised before anything is written to it, so a wrong path never damages someone's data.
import { accessSync, constants } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { LogUnavailable } from './event-log.js';

/** "SPL1" big-endian: the PRAGMA application_id that marks a file as this log. */
export const APPLICATION_ID = 0x53504c31;
export const SCHEMA_VERSION = 1;

/**
 * `position` is AUTOINCREMENT so positions are never reused after the tail is deleted (a cursor past
 * a deleted event must not skip a later one). `workspace_offsets` keeps each workspace's last offset
 * for the same reason: offsets keep increasing after the events that carried them are gone.
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
  metadata TEXT NOT NULL,
  feed_offset INTEGER,
  UNIQUE (stream, revision)
);
CREATE INDEX events_feed ON events (workspace_id, feed_offset) WHERE feed_offset IS NOT NULL;
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

/** Storage settings of a log file (the benchmark's ceiling uses them too). */
export const applyPragmas = (db: Database.Database): void => {
  // Only takes effect on a new file. A commit writes every page it touched, and each event touches
  // a random page of each index: smaller pages mean fewer bytes to fsync per commit.
  db.pragma('page_size = 2048');
  db.pragma('journal_mode = WAL');
  // FULL: every commit fsyncs the WAL, so an acknowledged append survives a crash.
  db.pragma('synchronous = FULL');
  // Checkpoints every ~16 MB of WAL rather than every 1000 pages, and index pages kept in memory.
  db.pragma('wal_autocheckpoint = 8192');
  db.pragma('cache_size = -32768');
};

/**
 * Exclusive locking mode, set before the first WAL access, keeps the WAL index in process memory and
 * holds an OS lock on the file from the first write until close: a second process (or connection)
 * gets SQLITE_BUSY at once, and a killed process releases the lock with its file descriptors.
 */
export const openLogDatabase = (file: string): Database.Database => {
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
    db = new Database(file, { timeout: 0 });
  } catch (error) {
    throw refuse(file, reasonFor(error), error);
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    const identity = checkIdentity(db);
    applyPragmas(db);
    // A write now takes the exclusive lock, also when the log already exists.
    db.transaction(() => {
      if (identity === 'ours') return;
      db.exec(SCHEMA);
      db.pragma(`application_id = ${APPLICATION_ID}`);
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
    return db;
  } catch (error) {
    db.close();
    const code = (error as { code?: unknown }).code;
    throw refuse(file, typeof code === 'string' ? reasonFor(error) : (error as Error).message, error);
  }
};
