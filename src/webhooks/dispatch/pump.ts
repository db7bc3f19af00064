// The workers: take due attempts from the RetrySchedule while there is room, overall (maxInFlight)
// and per subscription (maxInFlightPerSubscription). A subscription at its limit is skipped, not
// waited for, so a slow or dead endpoint only ever holds its own slots. Woken by new entries, by a
// finished attempt, by a timer set to the next due time, and, when the schedule is shared with other
// dispatchers (whose puts do not wake this one), every `wakeEveryMs`.
import type { MicrosClock } from '../../log/clock.js';
import type { DueAttempt, RetrySchedule } from './retry-schedule.js';

export interface PumpOptions {
  readonly schedule: RetrySchedule;
  readonly clock: MicrosClock;
  readonly maxInFlight: number;
  readonly maxInFlightPerSubscription: number;
  /** Performs one attempt; its slot is free again when the promise settles. */
  readonly run: (entry: DueAttempt) => Promise<void>;
  readonly wakeEveryMs?: number;
}

export interface Pump {
  /** Takes what is due now and from then on. */
  start(): void;
  kick(): void;
  /** Takes nothing more; resolves once the attempts in flight have settled. */
  stop(): Promise<void>;
}

/** How long a pump waits after the schedule failed before asking it again. */
const FAILURE_BACKOFF_MS = 250;

export const createPump = (options: PumpOptions): Pump => {
  const { schedule, clock, maxInFlight, maxInFlightPerSubscription } = options;
  const perSubscription = new Map<string, number>();
  const running = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | null = null;
  let ticker: NodeJS.Timeout | null = null;
  let stopped = false;
  let filling = false;
  let again = false;
  let kicked = false;
  let retry: NodeJS.Timeout | null = null;

  const room = (subscriptionId: string): number => maxInFlightPerSubscription - (perSubscription.get(subscriptionId) ?? 0);

  const launch = (entry: DueAttempt): void => {
    perSubscription.set(entry.subscriptionId, (perSubscription.get(entry.subscriptionId) ?? 0) + 1);
    const attempt = options
      .run(entry)
      .catch((error: unknown) => console.error(`webhook delivery ${entry.deliveryId}:`, error))
      .finally(() => {
        const left = (perSubscription.get(entry.subscriptionId) ?? 1) - 1;
        if (left === 0) perSubscription.delete(entry.subscriptionId);
        else perSubscription.set(entry.subscriptionId, left);
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
      const due = await schedule.takeDue(lookedAt, maxInFlight - running.size, room);
      if (due.length === 0) break;
      due.forEach(launch);
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
    async stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
      if (ticker !== null) clearInterval(ticker);
      if (retry !== null) clearTimeout(retry);
      while (running.size > 0) await Promise.allSettled([...running]);
    },
  };
};
