// Backpressure from the embedded delivery thread to the request thread. The two share a machine's
// cores: when writes come faster than the one delivery thread can send their webhooks, the attempts
// due pile up and every event's first attempt goes out later than the last. So while the delivery
// thread is behind on attempts already due AND its own event loop is busy, it says so in memory both
// threads share, and the request thread holds new writes of workspaces with subscriptions
// (src/http/middleware/backpressure.ts) until it is not, for at most a bound: the lag stays bounded
// and the cores the held requests leave go to the deliveries. Both conditions, because a slow or
// hanging receiver also leaves attempts waiting (its subscription's slots are full), but then the
// thread waits on the network with its loop idle: writes are never held for a receiver.
//
// The signal is a deadline in a SharedArrayBuffer (milliseconds since the epoch): the delivery side
// renews it every `everyMs` while the conditions hold, so a delivery thread that stops renewing
// (stuck, crashed, ended) releases the writes within three of its periods by itself.
import type { MicrosClock } from '../../log/clock.js';

export interface BackpressureOptions {
  /** Behind when the earliest waiting attempt fell due more than this long ago. */
  readonly lateMs: number;
  /** Busy when its event loop worked more than this share of the last period (0 to 1). */
  readonly busyShare: number;
  /** How often the delivery side looks (ms). */
  readonly everyMs: number;
}

export const BACKPRESSURE_DEFAULTS = { busyShare: 0.85, everyMs: 20 } as const;

/** The memory both threads share: one 64-bit deadline. */
export const createBackpressureBuffer = (): SharedArrayBuffer => new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT);

/** Whether writes are to wait: the earliest waiting attempt is over `lateMs` late and the loop was busier than `busyShare`. */
export const presses = (oldestDueAt: number | null, nowUs: number, busy: number, options: Pick<BackpressureOptions, 'lateMs' | 'busyShare'>): boolean =>
  oldestDueAt !== null && nowUs - oldestDueAt > options.lateMs * 1000 && busy > options.busyShare;

export interface DeliverySide {
  readonly stop: () => void;
}

/**
 * The delivery side: every `everyMs`, asks when the earliest waiting attempt fell due and how busy its
 * event loop was since the last look (a share from 0 to 1), and renews or clears the deadline.
 */
export const signalBackpressure = (
  buffer: SharedArrayBuffer,
  source: { readonly oldestDueAt: () => Promise<number | null>; readonly busy: () => number },
  clock: MicrosClock,
  options: BackpressureOptions,
  nowMs: () => number = Date.now,
): DeliverySide => {
  const deadline = new BigInt64Array(buffer);
  let looking = false;
  const look = async (): Promise<void> => {
    // A look still waiting for the schedule is not doubled by the next tick.
    if (looking) return;
    looking = true;
    try {
      const busy = source.busy();
      const dueAt = await source.oldestDueAt();
      Atomics.store(deadline, 0, presses(dueAt, clock(), busy, options) ? BigInt(nowMs() + 3 * options.everyMs) : 0n);
    } catch {
      // Not known: writes are not held for it.
      Atomics.store(deadline, 0, 0n);
    } finally {
      looking = false;
    }
  };
  const timer = setInterval(() => void look(), options.everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      Atomics.store(deadline, 0, 0n);
    },
  };
};

export interface RequestSide {
  /** The delivery thread asks for writes to be held now. */
  pressing(): boolean;
  /** Resolves once it no longer asks, or after `maxMs` at the latest. */
  eased(maxMs: number): Promise<void>;
  /** Releases what it held (its delivery thread ended). */
  clear(): void;
}

/** How often held requests look again. */
const RECHECK_MS = 5;

/** The request side: one timer looks for every held request while any waits. */
export const readBackpressure = (buffer: SharedArrayBuffer, nowMs: () => number = Date.now): RequestSide => {
  const deadline = new BigInt64Array(buffer);
  const pressing = (): boolean => nowMs() < Number(Atomics.load(deadline, 0));
  const waiting = new Set<{ readonly until: number; readonly done: () => void }>();
  let timer: NodeJS.Timeout | null = null;
  const recheck = (): void => {
    const now = nowMs();
    const eased = !pressing();
    for (const waiter of waiting) {
      if (!eased && now < waiter.until) continue;
      waiting.delete(waiter);
      waiter.done();
    }
    if (waiting.size === 0 && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  };
  return {
    pressing,
    eased: (maxMs) =>
      new Promise<void>((done) => {
        if (!pressing()) return done();
        waiting.add({ until: nowMs() + maxMs, done });
        timer ??= setInterval(recheck, RECHECK_MS);
      }),
    clear() {
      Atomics.store(deadline, 0, 0n);
      recheck();
    },
  };
};

/** The share of wall time the calling thread's event loop worked since the last call (the first call: since it started). */
export const eventLoopBusy = (): (() => number) => {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const share = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return share;
  };
};
