// One embedded service per data folder. The embedded role's main thread and its webhook dispatcher
// thread share the event log (shared mode, src/log/sqlite-open.ts), so the log's lock no longer keeps
// a second `npm start` off the folder: this lock does. A small SQLite file in the folder, written once
// in exclusive locking mode, holds an OS lock until it is closed; a second process (or connection)
// meets SQLITE_BUSY at once, and a killed process releases the lock with its file descriptors.
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { LogUnavailable } from './event-log.js';

export const INSTANCE_LOCK_FILE = 'instance.lock';

export interface InstanceLock {
  release(): void;
}

/** Holds `file` (a small SQLite file of its own) until release; throws SQLite's error (SQLITE_BUSY: held elsewhere). */
export const holdLockFile = (file: string): InstanceLock => {
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { timeout: 0 });
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL)');
    // The write takes the exclusive lock, which exclusive locking mode keeps until close.
    db.transaction(() => {
      db?.exec('DELETE FROM holder');
      db?.prepare('INSERT INTO holder (pid) VALUES (?)').run(process.pid);
    }).immediate();
  } catch (error) {
    db?.close();
    throw error;
  }
  const held = db;
  return { release: () => held.close() };
};

export const holdInstanceLock = (dataDir: string): InstanceLock => {
  const file = path.join(dataDir, INSTANCE_LOCK_FILE);
  try {
    return holdLockFile(file);
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    const reason = code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' ? 'it is in use by another process' : (error as Error).message;
    throw new LogUnavailable(`cannot use the data folder ${dataDir}: ${reason} (${file})`, { cause: error });
  }
};
