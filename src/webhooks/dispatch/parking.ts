// Where the embedded dispatcher parks the attempts it need not hold in memory (dispatcher.ts,
// `Parking`, decides which): each waiting delivery it held cost about 2 KB of its thread's heap (the
// delivery, its body, its schedule entry), so a receiver down for the hours a delivery's six attempts
// span, at a few hundred events a second, ran the thread out of heap, and a restart took the same
// backlog up again. A parked attempt is one row here, the delivery as the dispatcher held it, and
// nothing in the heap. That copy is exact: in the embedded mode the dispatcher thread is the only
// writer of a waiting delivery (a manual retry is accepted only once a delivery is settled; a
// deactivation or a deletion reaches the thread). The file is a scratch pad: removed at open and at
// close, never synced, rebuilt from the delivery history by every start, as the schedule it extends.
import { rmSync } from 'node:fs';
import Database from 'better-sqlite3';
import type { Delivery } from '../../domain/delivery/delivery.js';

export interface ParkedAttempt {
  /** The waiting delivery as the dispatcher held it. */
  readonly delivery: Delivery;
  /** µs since the epoch. */
  readonly dueAt: number;
  /** A later attempt (or a manual retry); else a first attempt. */
  readonly retry: boolean;
}

export interface ParkingLot {
  /** Parks each attempt (of a delivery not parked already); written with the others of the event-loop turn. */
  park(attempts: readonly ParkedAttempt[]): void;
  /** Takes out (removes and returns) up to `limit` of the subscription's parked retries due at or before `until`, earliest first. */
  takeRetries(subscriptionId: string, until: number, limit: number): ParkedAttempt[];
  /** Takes out up to `limit` of the subscription's parked first attempts, earliest first. */
  takeFirsts(subscriptionId: string, limit: number): ParkedAttempt[];
  /** Takes out up to `limit` of the subscription's parked attempts of either kind. */
  takeAny(subscriptionId: string, limit: number): ParkedAttempt[];
  /**
   * Forgets up to `limit` of the subscription's attempts (one statement over a dead receiver's
   * 300,000 held the thread half a second); returns how many went.
   */
  drop(subscriptionId: string, limit: number): number;
  /** How many first attempts the subscription has parked (every subscription's when omitted). */
  firsts(subscriptionId?: string): number;
  /** Subscriptions with attempts parked. */
  subscriptions(): readonly string[];
  has(subscriptionId: string): boolean;
  size(): number;
  /** The earliest due time parked, or null. */
  earliestDue(): number | null;
  close(): void;
}

/** The lot's file in the data folder. */
export const PARKING_FILE = 'webhook-parked.sqlite';

/**
 * What the embedded dispatcher parks (dispatcher.ts, `Parking`): retries due over 10 s ahead (the
 * first retry is due 30 s after a failure), and past 100,000 deliveries held (about 200 MB) the
 * attempts of the subscriptions holding over 1,000: a burst the thread delivers in seconds is held whole.
 */
export const PARKING_LIMITS = { horizonMs: 10_000, maxHeld: 100_000, heldPerSubscription: 1_000 } as const;

interface Row {
  readonly seq: number;
  readonly due_at: number;
  readonly retry: number;
  readonly delivery: string;
}

const parked = (row: Row): ParkedAttempt => ({ delivery: JSON.parse(row.delivery) as Delivery, dueAt: row.due_at, retry: row.retry === 1 });

const removeFiles = (file: string): void => {
  for (const suffix of ['', '-journal']) rmSync(file + suffix, { force: true });
};

export const openParkingLot = (file: string): ParkingLot => {
  removeFiles(file);
  const db = new Database(file);
  // Nothing here outlives the process: no journal, no sync.
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  // Rows go in at the end of the table (seq grows); a delivery is parked once at a time (it is
  // forgotten when parked, held again when taken out), so its id needs no index.
  db.exec(`
    CREATE TABLE parked (seq INTEGER PRIMARY KEY, subscription_id TEXT NOT NULL, due_at INTEGER NOT NULL, retry INTEGER NOT NULL, delivery TEXT NOT NULL);
    CREATE INDEX parked_due ON parked (retry, due_at, seq);
    CREATE INDEX parked_by_subscription ON parked (subscription_id, retry, due_at, seq);
  `);
  const insert = db.prepare('INSERT INTO parked (subscription_id, due_at, retry, delivery) VALUES (?, ?, ?, ?)');
  /** Removes the rows the inner select picks and returns them (in no order: sorted after). */
  const taking = (where: string): Database.Statement =>
    db.prepare(`DELETE FROM parked WHERE seq IN (SELECT seq FROM parked ${where}) RETURNING seq, due_at, retry, delivery`);
  const dueRetries = taking('WHERE subscription_id = ? AND retry = 1 AND due_at <= ? ORDER BY due_at, seq LIMIT ?');
  const firstsOf = taking('WHERE subscription_id = ? AND retry = 0 ORDER BY due_at, seq LIMIT ?');
  const anyOf = taking('WHERE subscription_id = ? LIMIT ?');
  const dropSome = db.prepare<[string, number], { readonly retry: number }>('DELETE FROM parked WHERE seq IN (SELECT seq FROM parked WHERE subscription_id = ? LIMIT ?) RETURNING retry');
  const earliest = db.prepare<[number], { readonly due_at: number | null }>('SELECT min(due_at) AS due_at FROM parked WHERE retry = ?');
  /** Rows and first attempts parked per subscription, and rows in all: kept here, as a count would scan the table. */
  const bySubscription = new Map<string, { rows: number; firsts: number }>();
  let rows = 0;

  const counted = (subscriptionId: string, retry: boolean, by: number): void => {
    rows += by;
    const counts = bySubscription.get(subscriptionId) ?? { rows: 0, firsts: 0 };
    counts.rows += by;
    if (!retry) counts.firsts += by;
    if (counts.rows > 0) bySubscription.set(subscriptionId, counts);
    else bySubscription.delete(subscriptionId);
  };

  const insertAll = db.transaction((attempts: readonly ParkedAttempt[]) => {
    for (const attempt of attempts) insert.run(attempt.delivery.subscriptionId, attempt.dueAt, attempt.retry ? 1 : 0, JSON.stringify(attempt.delivery));
  });
  /**
   * Parked, counted, not written yet: the parks of an event-loop turn go in one transaction at its
   * end (a transaction each, as a fan-out parks, cost 25 µs an attempt in writes of pages), and
   * before any read of the table.
   */
  let unwritten: ParkedAttempt[] = [];
  let writing: NodeJS.Immediate | null = null;
  const written = (): void => {
    if (writing !== null) clearImmediate(writing);
    writing = null;
    if (unwritten.length === 0) return;
    const attempts = unwritten;
    unwritten = [];
    insertAll(attempts);
  };

  const take = (statement: Database.Statement, ...params: unknown[]): ParkedAttempt[] => {
    written();
    const found = (statement.all(...params) as Row[]).sort((a, b) => a.due_at - b.due_at || a.seq - b.seq).map(parked);
    for (const attempt of found) counted(attempt.delivery.subscriptionId, attempt.retry, -1);
    return found;
  };

  return {
    park(attempts) {
      for (const attempt of attempts) counted(attempt.delivery.subscriptionId, attempt.retry, 1);
      unwritten.push(...attempts);
      writing ??= setImmediate(written);
    },
    takeRetries: (subscriptionId, until, limit) => take(dueRetries, subscriptionId, until, limit),
    takeFirsts: (subscriptionId, limit) => take(firstsOf, subscriptionId, limit),
    takeAny: (subscriptionId, limit) => take(anyOf, subscriptionId, limit),
    drop(subscriptionId, limit) {
      written();
      const dropped = dropSome.all(subscriptionId, limit);
      for (const { retry } of dropped) counted(subscriptionId, retry === 1, -1);
      return dropped.length;
    },
    firsts: (subscriptionId) =>
      subscriptionId === undefined ? [...bySubscription.values()].reduce((sum, counts) => sum + counts.firsts, 0) : (bySubscription.get(subscriptionId)?.firsts ?? 0),
    subscriptions: () => [...bySubscription.keys()],
    has: (subscriptionId) => bySubscription.has(subscriptionId),
    size: () => rows,
    earliestDue() {
      written();
      const times = [0, 1].map((retry) => earliest.get(retry)?.due_at ?? null).filter((t): t is number => t !== null);
      return times.length === 0 ? null : Math.min(...times);
    },
    close() {
      if (writing !== null) clearImmediate(writing);
      db.close();
      removeFiles(file);
    },
  };
};
