// Group commit: writes submitted while the event loop is busy share ONE transaction, so a burst of
// concurrent appends costs one fsync instead of one each. A write must be atomic by itself (one
// that throws takes out what it wrote before it throws: sqlite-insert.ts), so it is rejected alone
// and the others commit. BEGIN IMMEDIATE takes the write lock before the first read,
// so what a batch reads no other process can change under it. In shared mode another connection may
// hold that lock: the batch does not wait for it in SQLite's busy handler, which would stop this
// thread's event loop (a dispatcher thread's record commit once stalled every request of the main
// thread), but tries again on a timer, with the writes submitted meanwhile joining it.
//
// A batch also waits a turn or more for writes still coming in few at a time. Since libuv 1.45 a
// server accepts one connection per turn of the loop (libuv/libuv#3696), so clients that open a
// connection per request bring about one request a turn, and a commit at every turn carried one
// or two writes and a whole fsync each (64 such clients: 721 tickets/s against 2,778 on kept-alive
// connections). The wait is bounded by what the last batch cost apart from its writes (BEGIN, the
// hooks, COMMIT and its fsync), the part that sharing saves, so it never costs more than it saves:
// about an fsync in full durability, next to nothing when relaxed.
import type Database from 'better-sqlite3';

export interface GroupCommitHooks {
  /** Inside the transaction, before the first write of the batch (to learn what other connections did). */
  begin(): void;
  /** Inside the transaction, after the last write of the batch (to persist what the batch staged). */
  beforeCommit(): void;
  /** After the batch is durable. */
  afterCommit(): void;
  /** After the whole batch failed to commit (to discard what it staged). */
  afterRollback(): void;
}

export interface GroupCommitOptions {
  /** How long a batch waits for another connection's write lock before it fails (0: fails at once). */
  readonly lockWaitMs: number;
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

/** Another connection holds the write lock: the transaction was rolled back with nothing written. */
const lockedOut = (error: unknown): boolean => (error as { code?: unknown }).code === 'SQLITE_BUSY';

/** A batch this large already shares its commit well: it goes at once. */
export const GATHER_WRITES = 16;
/** The longest a batch waits for more writes, however slow the last commit was. */
const GATHER_MAX_MS = 4;

/** The first retry after 1 ms, doubling to 16 ms, each with ±50 % jitter so two waiting writers part. */
const retryDelayMs = (tries: number): number => Math.min(16, 2 ** (tries - 1)) * (0.5 + Math.random());

export const groupCommit = (db: Database.Database, hooks: GroupCommitHooks, options: GroupCommitOptions = { lockWaitMs: 0 }): GroupCommit => {
  let queue: Pending[] = [];
  let idle: Promise<void> = Promise.resolve();
  let markIdle = (): void => {};
  const stats = { transactions: 0, writes: 0 };
  // The connection's busy timeout stays for its reads; a batch asks for the lock without it.
  const waitsForLock = options.lockWaitMs > 0;
  const busyTimeout = waitsForLock ? Number(db.pragma('busy_timeout', { simple: true })) : 0;
  /** While the lock is held elsewhere: when the oldest write first met it, and how often since. */
  let lockedOutSince: number | null = null;
  let tries = 0;
  /** What the last batch cost apart from its writes, in ms: how long the next one may wait for more. */
  let lastBatchCostMs = 0;
  /** Time spent in the current batch's writes. */
  let writesMs = 0;
  /** While the next batch gathers: when its first write came, and its size at the last look. */
  let gatheringSince = 0;
  let sizeAtLook = 0;

  // Not prepared once: SQLite sets the busy timeout when a PRAGMA statement is prepared, not when it runs.
  const setBusyTimeout = (ms: number): void => void db.pragma(`busy_timeout = ${ms}`);
  const runBatch = (batch: readonly Pending[]): readonly Outcome[] => {
    if (!waitsForLock) return inTransaction(batch);
    setBusyTimeout(0);
    try {
      return inTransaction(batch);
    } finally {
      setBusyTimeout(busyTimeout);
    }
  };

  const inTransaction = (batch: readonly Pending[]): readonly Outcome[] =>
    db.transaction(() => {
      hooks.begin();
      const outcomes = batch.map((pending): Outcome => {
        const started = performance.now();
        try {
          return { ok: true, value: pending.write() };
        } catch (error) {
          // Some errors (I/O, disk full) end the whole transaction: then the batch fails as one.
          if (!db.inTransaction) throw error;
          return { ok: false, error };
        } finally {
          writesMs += performance.now() - started;
        }
      });
      hooks.beforeCommit();
      return outcomes;
    }).immediate();

  const flush = (): void => {
    const batch = queue;
    queue = [];
    let outcomes: readonly Outcome[];
    const started = performance.now();
    writesMs = 0;
    try {
      outcomes = runBatch(batch);
      lastBatchCostMs = performance.now() - started - writesMs;
    } catch (error) {
      hooks.afterRollback();
      const now = Date.now();
      lockedOutSince = lockedOut(error) ? (lockedOutSince ?? now) : null;
      if (lockedOutSince !== null && now - lockedOutSince < options.lockWaitMs) {
        // Still within the wait: the batch goes first in the next try, joined by what comes meanwhile.
        queue = [...batch, ...queue];
        setTimeout(flush, retryDelayMs(++tries));
        return;
      }
      lockedOutSince = null;
      tries = 0;
      batch.forEach((pending) => pending.reject(error));
      markIdle();
      return;
    }
    lockedOutSince = null;
    tries = 0;
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

  /** At each turn's end: commits unless the batch grew in the turn, is still small and has not waited its bound. */
  const gather = (): void => {
    const growing = queue.length > sizeAtLook && queue.length < GATHER_WRITES;
    if (growing && performance.now() - gatheringSince < Math.min(lastBatchCostMs, GATHER_MAX_MS)) {
      sizeAtLook = queue.length;
      setImmediate(gather);
      return;
    }
    flush();
  };

  const submit = <R>(write: () => R): Promise<R> =>
    new Promise<R>((resolve, reject) => {
      if (queue.length === 0) {
        // setImmediate, not a microtask: writers resumed by the previous commit all get to submit
        // before this batch closes, however many awaits their code takes.
        idle = new Promise((done) => {
          markIdle = done;
        });
        gatheringSince = performance.now();
        sizeAtLook = 0;
        setImmediate(gather);
      }
      queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
    });

  return { submit, drain: () => idle, stats };
};
