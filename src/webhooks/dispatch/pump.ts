// The workers: take due attempts from the RetrySchedule while there is room, overall (maxInFlight),
// per subscription (maxInFlightPerSubscription) and per workspace (maxInFlightPerWorkspace). A
// subscription at its limit, or whose workspace is at its limit, is skipped, not waited for: a slow or
// dead endpoint only ever holds its own slots, and one workspace's endpoints only their workspace's.
// A take charges a workspace what its subscriptions take (the schedule's pools), not their limits.
// Woken by new entries, by a finished attempt, by a timer set to the next due time, and, when the
// schedule is shared with other dispatchers (whose puts do not wake this one), every `wakeEveryMs`.
// New entries due now may be taken as they are put (`put`), without waiting for a take of their own.
// One take at a time (a fill's or a put's): each counts what the one before it set in flight.
import type { MicrosClock } from '../../log/clock.js';
import type { DueAttempt, RetrySchedule, SharedRoom } from './retry-schedule.js';

export interface PumpOptions {
  readonly schedule: RetrySchedule;
  readonly clock: MicrosClock;
  readonly maxInFlight: number;
  readonly maxInFlightPerSubscription: number;
  readonly maxInFlightPerWorkspace: number;
  /** The subscription's workspace; undefined once it is deleted (its attempt then ends without sending). */
  readonly workspaceOf: (subscriptionId: string) => string | undefined;
  /** Performs one attempt; its slot is free again when the promise settles. */
  readonly run: (entry: DueAttempt) => Promise<void>;
  readonly wakeEveryMs?: number;
}

export interface Pump {
  /** Takes what is due now and from then on. */
  start(): void;
  kick(): void;
  /** Puts the entries into the schedule and, those due now, takes there and then as far as there is room. */
  put(entries: readonly DueAttempt[]): Promise<void>;
  /** Attempts in flight now. */
  load(): number;
  /** Takes nothing more; resolves once the attempts in flight have settled. */
  stop(): Promise<void>;
}

/** How long a pump waits after the schedule failed before asking it again. */
const FAILURE_BACKOFF_MS = 250;

export const createPump = (options: PumpOptions): Pump => {
  const { schedule, clock, maxInFlight, maxInFlightPerSubscription, maxInFlightPerWorkspace, workspaceOf } = options;
  const perSubscription = new Map<string, number>();
  const perWorkspace = new Map<string, number>();
  const running = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | null = null;
  let ticker: NodeJS.Timeout | null = null;
  let stopped = false;
  let filling = false;
  let again = false;
  let kicked = false;
  let retry: NodeJS.Timeout | null = null;

  const count = (counts: Map<string, number>, key: string | undefined, by: number): void => {
    if (key === undefined) return;
    const n = (counts.get(key) ?? 0) + by;
    if (n === 0) counts.delete(key);
    else counts.set(key, n);
  };

  /** A subscription's room, and its workspace's (the pool its subscriptions share), from what is in flight. */
  const room = (subscriptionId: string): number => maxInFlightPerSubscription - (perSubscription.get(subscriptionId) ?? 0);
  const workspaces: SharedRoom = { of: workspaceOf, room: (workspace) => maxInFlightPerWorkspace - (perWorkspace.get(workspace) ?? 0) };

  /** The take under way, if any: the next one waits for it, and for its attempts to be in flight. */
  let taking: Promise<unknown> = Promise.resolve();

  /** Runs one take for the room left and launches what it brought; how many were asked and how many came. */
  const takeWith = (take: (limit: number) => Promise<DueAttempt[]>): Promise<{ asked: number; taken: number }> => {
    const turn = taking.then(async () => {
      const asked = Math.max(0, maxInFlight - running.size);
      const due = await take(asked);
      due.forEach(launch);
      return { asked, taken: due.length };
    });
    taking = turn.catch(() => undefined);
    return turn;
  };

  const launch = (entry: DueAttempt): void => {
    const workspace = workspaceOf(entry.subscriptionId);
    count(perSubscription, entry.subscriptionId, 1);
    count(perWorkspace, workspace, 1);
    const attempt = options
      .run(entry)
      .catch((error: unknown) => console.error(`webhook delivery ${entry.deliveryId}:`, error))
      .finally(() => {
        count(perSubscription, entry.subscriptionId, -1);
        count(perWorkspace, workspace, -1);
        running.delete(attempt);
        kick();
      });
    running.add(attempt);
  };

  /** `lookedAt`: the instant of the last take. An entry due by then was left for lack of room: a finishing attempt kicks again. */
  const arm = (dueAt: number | null, lookedAt: number): void => {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    if (dueAt === null || dueAt <= lookedAt || stopped) return;
    timer = setTimeout(kick, Math.max(0, Math.ceil((dueAt - clock()) / 1000)));
  };

  const fill = async (): Promise<void> => {
    let lookedAt = clock();
    /** What the last take saw next due, told with the take (a shared schedule's round trip saved); undefined: no take told it. */
    let next: number | null | undefined;
    while (!stopped && running.size < maxInFlight) {
      const { asked, taken } = await takeWith(async (limit) => {
        next = undefined;
        return limit === 0 ? [] : schedule.takeDue((lookedAt = clock()), limit, room, workspaces, (at) => void (next = at));
      });
      // Fewer than asked: nothing else was due with room, and another take now would find the same
      // (a shared schedule's round trip for nothing). What is put meanwhile kicks a fill of its own.
      if (taken < asked) break;
    }
    arm(next === undefined ? await schedule.nextDueAt() : next, lookedAt);
  };

  /** The fill under way, if any: a stop waits for it, so that it never asks a schedule closed after the stop. */
  let filled: Promise<void> = Promise.resolve();

  /** Coalesced to one fill per turn of the event loop: a burst of puts and finished attempts costs one take. */
  function kick(): void {
    if (stopped || kicked || retry !== null) return;
    kicked = true;
    setImmediate(() => {
      kicked = false;
      if (stopped) return;
      if (filling) {
        again = true;
        return;
      }
      filling = true;
      let failed = false;
      filled = fill()
        .catch((error: unknown) => {
          failed = true;
          console.error('webhook retry schedule:', error);
        })
        .finally(() => {
          filling = false;
          // A failing schedule (Redis away or slow) is asked again after a pause, not on every finished attempt.
          if (failed) {
            again = false;
            if (!stopped && retry === null) {
              retry = setTimeout(() => {
                retry = null;
                kick();
              }, FAILURE_BACKOFF_MS);
            }
          } else if (again) {
            again = false;
            kick();
          }
        });
    });
  }

  /** Puts waiting for the take under way: they go in one putAndTake when it is done. */
  interface QueuedPuts {
    readonly entries: DueAttempt[];
    readonly waiters: { resolve(): void; reject(error: unknown): void }[];
  }
  let queued: QueuedPuts | null = null;

  /**
   * Entries due now are taken along with the put, with the puts made while the take before was under
   * way (one round trip for all of them, as a group commit); one left for lack of room kicks a fill,
   * which takes it once there is room. Entries none of which is due yet are only put (and kick, for
   * the timer of the next due time).
   */
  const put = async (entries: readonly DueAttempt[]): Promise<void> => {
    if (stopped || !entries.some((entry) => entry.dueAt <= clock())) {
      await schedule.put(...entries);
      kick();
      return;
    }
    if (queued === null) {
      const batch: QueuedPuts = { entries: [], waiters: [] };
      queued = batch;
      takeWith((limit) => {
        if (queued === batch) queued = null;
        return schedule.putAndTake(batch.entries, clock(), limit, room, workspaces);
      }).then(
        ({ taken }) => {
          if (taken < batch.entries.length) kick();
          batch.waiters.forEach((waiter) => waiter.resolve());
        },
        (error: unknown) => batch.waiters.forEach((waiter) => waiter.reject(error)),
      );
    }
    const batch = queued;
    batch.entries.push(...entries);
    await new Promise<void>((resolve, reject) => batch.waiters.push({ resolve, reject }));
  };

  return {
    put,
    start() {
      if (options.wakeEveryMs !== undefined && ticker === null && !stopped) ticker = setInterval(kick, options.wakeEveryMs);
      kick();
    },
    kick,
    load: () => running.size,
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      if (ticker !== null) clearInterval(ticker);
      if (retry !== null) clearTimeout(retry);
      await filled;
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
};
