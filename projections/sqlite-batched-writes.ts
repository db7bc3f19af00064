// One SQLite write transaction at a time for a projection store: opened by the first write, committed
// on the next macrotask (or `commitAfterMs` later) or after `batch` counted writes, so a catch-up
// commits once per page of the log rather than once per event. A failed write or commit rolls the
// transaction back and throws what the store's `failed` makes of the error (a ProjectionReset: its
// runners resume from the file's checkpoints).
import type Database from 'better-sqlite3';

export interface BatchedWrites {
  /** Runs `run` in the open transaction (opening one when none is). */
  write<T>(run: () => T): T;
  /** Counts `count` writes (default one apply); commits once `batch` are counted. */
  counted(count?: number): void;
  /** Commits the open transaction now (its checkpoint written first by `beforeCommit`). */
  commit(): void;
}

export const batchedWrites = (
  db: Database.Database,
  options: {
    readonly batch: number;
    /**
     * How long an open transaction waits for more writes before it commits (default: the next
     * macrotask). Longer suits a store read from other connections that may lag: each commit
     * rewrites the pages it touched, and a live tail touches the same pages over and over.
     */
    readonly commitAfterMs?: number;
    readonly beforeCommit: () => void;
    /** After a commit succeeded. */
    readonly afterCommit?: () => void;
    readonly failed: (error: unknown) => Error;
  },
): BatchedWrites => {
  let applied = 0;
  let commitSoon: NodeJS.Immediate | NodeJS.Timeout | null = null;
  const cancelCommit = (): void => {
    if (commitSoon === null) return;
    if (options.commitAfterMs === undefined) clearImmediate(commitSoon as NodeJS.Immediate);
    else clearTimeout(commitSoon as NodeJS.Timeout);
    commitSoon = null;
  };

  const failed = (error: unknown): Error => {
    try {
      if (db.inTransaction) db.exec('ROLLBACK');
    } catch {
      // SQLite rolled back already.
    }
    return options.failed(error);
  };

  const commit = (): void => {
    cancelCommit();
    applied = 0;
    if (!db.inTransaction) return;
    try {
      options.beforeCommit();
      db.exec('COMMIT');
    } catch (error) {
      failed(error);
      return;
    }
    options.afterCommit?.();
  };

  return {
    write(run) {
      try {
        if (!db.inTransaction) {
          db.exec('BEGIN');
          commitSoon = options.commitAfterMs === undefined ? setImmediate(commit) : setTimeout(commit, options.commitAfterMs);
        }
        return run();
      } catch (error) {
        throw failed(error);
      }
    },
    counted(count = 1) {
      applied += count;
      if (applied >= options.batch) commit();
    },
    commit,
  };
};
