// Group commit: writes submitted while the event loop is busy share ONE transaction, so a burst of
// concurrent appends costs one fsync instead of one each. A write must be atomic by itself (one
// writing statement, or a savepoint of its own): one that throws has written nothing, so it is
// rejected alone and the others commit. BEGIN IMMEDIATE takes the write lock before the first read,
// so what a batch reads no other process can change under it.
import type Database from 'better-sqlite3';

export interface GroupCommitHooks {
  /** Inside the transaction, after the last write of the batch (to persist what the batch staged). */
  beforeCommit(): void;
  /** After the batch is durable. */
  afterCommit(): void;
  /** After the whole batch failed to commit (to discard what it staged). */
  afterRollback(): void;
}

export interface GroupCommit {
  /** Runs `write` in the next shared transaction; resolves with its result once committed. */
  submit<R>(write: () => R): Promise<R>;
  /** Resolves once every write submitted so far has settled. */
  drain(): Promise<void>;
  readonly stats: { transactions: number; writes: number };
}

interface Pending {
  readonly write: () => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown };

export const groupCommit = (db: Database.Database, hooks: GroupCommitHooks): GroupCommit => {
  let queue: Pending[] = [];
  let idle: Promise<void> = Promise.resolve();
  let markIdle = (): void => {};
  const stats = { transactions: 0, writes: 0 };

  const runBatch = (batch: readonly Pending[]): readonly Outcome[] =>
    db.transaction(() => {
      const outcomes = batch.map((pending): Outcome => {
        try {
          return { ok: true, value: pending.write() };
        } catch (error) {
          // Some errors (I/O, disk full) end the whole transaction: then the batch fails as one.
          if (!db.inTransaction) throw error;
          return { ok: false, error };
        }
      });
      hooks.beforeCommit();
      return outcomes;
    }).immediate();

  const flush = (): void => {
    const batch = queue;
    queue = [];
    let outcomes: readonly Outcome[];
    try {
      outcomes = runBatch(batch);
    } catch (error) {
      hooks.afterRollback();
      batch.forEach((pending) => pending.reject(error));
      markIdle();
      return;
    }
    stats.transactions += 1;
    stats.writes += batch.length;
    hooks.afterCommit();
    batch.forEach((pending, i) => {
      const outcome = outcomes[i] as Outcome;
      if (outcome.ok) pending.resolve(outcome.value);
      else pending.reject(outcome.error);
    });
    markIdle();
  };

  const submit = <R>(write: () => R): Promise<R> =>
    new Promise<R>((resolve, reject) => {
      if (queue.length === 0) {
        // setImmediate, not a microtask: writers resumed by the previous commit all get to submit
        // before this batch closes, however many awaits their code takes.
        idle = new Promise((done) => {
          markIdle = done;
        });
        setImmediate(flush);
      }
      queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
    });

  return { submit, drain: () => idle, stats };
};
