// The workers: take due attempts from the RetrySchedule while there is room, overall (maxInFlight),
// per subscription (maxInFlightPerSubscription) and per workspace (maxInFlightPerWorkspace). A
// subscription at its limit, or whose workspace is at its limit, is skipped, not waited for: a slow or
// dead endpoint only ever holds its own slots, and one workspace's endpoints only their workspace's.
// Woken by new entries, by a finished attempt, by a timer set to the next due time, and, when the
// schedule is shared with other dispatchers (whose puts do not wake this one), every `wakeEveryMs`.
import type { MicrosClock } from '../../log/clock.js';
import type { DueAttempt, RetrySchedule } from './retry-schedule.js';

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

  /**
   * The room of each subscription for one take. The schedule asks once per subscription and may take
   * up to the room granted, so what is granted to one subscription is charged to its workspace at
   * once: the workspace's other subscriptions get only what is left. (A subscription granted more
   * than it had due leaves the rest to the next take, which counts what is really in flight.)
   */
  const roomForTake = (): ((subscriptionId: string) => number) => {
    const granted = new Map<string, number>();
    return (subscriptionId) => {
      const own = maxInFlightPerSubscription - (perSubscription.get(subscriptionId) ?? 0);
      const workspace = workspaceOf(subscriptionId);
      if (workspace === undefined) return own;
      const room = Math.max(0, Math.min(own, maxInFlightPerWorkspace - (perWorkspace.get(workspace) ?? 0) - (granted.get(workspace) ?? 0)));
      count(granted, workspace, room);
      return room;
    };
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
    while (!stopped && running.size < maxInFlight) {
      lookedAt = clock();
      const asked = maxInFlight - running.size;
      const due = await schedule.takeDue(lookedAt, asked, roomForTake());
      due.forEach(launch);
      // Fewer than asked: nothing else was due with room, and another take now would find the same
      // (a shared schedule's round trip for nothing). What is put meanwhile kicks a fill of its own.
      if (due.length < asked) break;
    }
    arm(await schedule.nextDueAt(), lookedAt);
  };

  /** Coalesced to one fill per turn of the event loop: a burst of puts and finished attempts costs one take. */
  function kick(): void {
    if (stopped || kicked || retry !== null) return;
    kicked = true;
    setImmediate(() => {
      kicked = false;
      if (filling) {
        again = true;
        return;
      }
      filling = true;
      let failed = false;
      void fill()
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

  return {
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
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
};
