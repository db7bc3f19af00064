// Backpressure from webhook delivery to the API's writes. The two share a machine's cores in the
// embedded mode: when writes come faster than the one delivery thread can send their webhooks, the
// attempts due pile up and every event's first attempt goes out later than the last. So while a
// delivery engine is behind on attempts already due AND its own event loop is busy, it says so, and
// the request side holds new writes of workspaces with subscriptions (src/http/middleware/write-hold.ts)
// until it no longer does, for at most a bound: the lag stays bounded, and in the embedded mode the
// cores the held requests leave go to the deliveries. Both conditions, because a slow or hanging
// receiver also leaves attempts waiting (its subscription's slots are full), but then the engine
// waits on the network with its loop idle: writes are never held for a receiver.
//
// What it says is a hold for the next three of its periods, renewed at each look while the conditions
// last, so an engine that stops renewing (stuck, crashed, ended) releases the writes by itself. The
// embedded delivery thread writes it as a deadline into memory it shares with the main thread
// (`sharedDeadline`); the distributed dispatchers publish it to the API servers through Redis
// (backpressure-redis.ts).
import type { WriteHold } from '../../http/middleware/write-hold.js';
import type { MicrosClock } from '../../log/clock.js';
import type { SubscriptionDirectory } from '../subscriptions.js';
import type { EngineStatusSource } from './backlog.js';

export interface BackpressureOptions {
  /** Behind when the earliest waiting attempt fell due more than this long ago. */
  readonly lateMs: number;
  /** Busy when its event loop worked more than this share of the last period (0 to 1). */
  readonly busyShare: number;
  /** How often the delivery side looks (ms). */
  readonly everyMs: number;
}

export const BACKPRESSURE_DEFAULTS = { busyShare: 0.85, everyMs: 20 } as const;

/** Whether writes are to wait: the earliest waiting attempt is over `lateMs` late and the loop was busier than `busyShare`. */
export const presses = (oldestDueAt: number | null, nowUs: number, busy: number, options: Pick<BackpressureOptions, 'lateMs' | 'busyShare'>): boolean =>
  oldestDueAt !== null && nowUs - oldestDueAt > options.lateMs * 1000 && busy > options.busyShare;

/** Where an engine says it presses: `press(forMs)` at each look while it does, `press(0)` once when it stops. */
export type Press = (forMs: number) => void;

export interface DeliverySide {
  readonly stop: () => void;
}

/**
 * The delivery side: every `everyMs`, asks how busy its event loop was since the last look (a share
 * from 0 to 1) and, when busy, when the earliest waiting attempt fell due; presses for three periods
 * while both say so.
 */
export const signalBackpressure = (
  press: Press,
  source: { readonly oldestDueAt: () => Promise<number | null>; readonly busy: () => number },
  clock: MicrosClock,
  options: BackpressureOptions,
): DeliverySide => {
  let looking = false;
  let pressing = false;
  const say = (now: boolean): void => {
    if (now) press(3 * options.everyMs);
    else if (pressing) press(0);
    pressing = now;
  };
  const look = async (): Promise<void> => {
    // A look still waiting for the schedule is not doubled by the next tick.
    if (looking) return;
    looking = true;
    try {
      const busy = source.busy();
      // An idle loop presses nothing, whatever waits: the schedule is not even asked (a shared one is a round trip).
      say(busy > options.busyShare && presses(await source.oldestDueAt(), clock(), busy, options));
    } catch {
      // Not known: writes are not held for it.
      say(false);
    } finally {
      looking = false;
    }
  };
  const timer = setInterval(() => void look(), options.everyMs);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      say(false);
    },
  };
};

/** Presses while the engine (this thread's) is behind and its event loop busy, with the default period and share. */
export const pressWhileBehind = (press: Press, engine: EngineStatusSource, clock: MicrosClock, lateMs: number): DeliverySide =>
  signalBackpressure(press, { oldestDueAt: async () => (await engine())?.backlog.oldestDueAt ?? null, busy: eventLoopBusy() }, clock, { ...BACKPRESSURE_DEFAULTS, lateMs });

/** A deadline (ms since the epoch, 0 for none) the request side reads. */
export interface Deadline {
  read(): number;
  /** No deadline any more. */
  clear(): void;
}

/** The memory the embedded delivery thread and the main thread share: one 64-bit deadline. */
export const createBackpressureBuffer = (): SharedArrayBuffer => new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT);

/** The deadline in `buffer`, and how an engine in another thread presses it. */
export const sharedDeadline = (buffer: SharedArrayBuffer, nowMs: () => number = Date.now): Deadline & { readonly press: Press } => {
  const cell = new BigInt64Array(buffer);
  return {
    read: () => Number(Atomics.load(cell, 0)),
    clear: () => void Atomics.store(cell, 0, 0n),
    press: (forMs) => void Atomics.store(cell, 0, forMs > 0 ? BigInt(nowMs() + forMs) : 0n),
  };
};

export interface RequestSide {
  /** Writes are to wait now: a delivery engine asks for it, or earlier writes still wait. */
  pressing(): boolean;
  /**
   * Resolves at its turn once no engine asks any more, or after `maxMs` at the latest; at once when
   * `gone` aborts (its client left), giving its place up to the next.
   */
  eased(maxMs: number, gone?: AbortSignal): Promise<void>;
  /** Releases what it held (its delivery engine ended). */
  clear(): void;
}

/** How often held requests look again. */
const RECHECK_MS = 5;
/**
 * Once the engine no longer presses, the requests held go a few at each look, the longest held first,
 * and new writes wait behind them, at a pace the release learns as TCP learns its window (additive
 * increase, multiplicative decrease): RELEASE_START a look at first, RELEASE_GROWTH more after each
 * look that left some waiting, and RELEASE_DECREASE of it from the look a press begins (never below
 * RELEASE_FLOOR; fractions carry over to the next look). So after a press it goes on a little below
 * the pace that made the engine late, and stays near what the engine delivers, where a pace that
 * started over at 2 after every press and grew by 1 a look outran the engine within a few looks: a
 * wave of writes that reached it together, each owing it 10 deliveries, and the last of the wave
 * delivered 200 ms and more after its commit. Halving at a press cut the lag as well but wasted more
 * of the engine (RELIABILITY.md, "Backpressure"). All at once, the 64 writers of a burst went
 * together and the engine pressed again at once. Growth stops while the queue empties at each look,
 * so a pace that a quiet spell never used does not build up.
 */
export const RELEASE_START = 2;
export const RELEASE_GROWTH = 0.05;
export const RELEASE_DECREASE = 0.8;
export const RELEASE_FLOOR = 0.2;

/** How many held writes each look lets go: `look(pressed, waiting)`, called once a look. */
export const releasePace = (): ((pressed: boolean, waiting: number) => number) => {
  let pace = RELEASE_START;
  let credit = 0;
  let wasPressed = false;
  return (pressed, waiting) => {
    if (pressed && !wasPressed) pace = Math.max(RELEASE_FLOOR, pace * RELEASE_DECREASE);
    wasPressed = pressed;
    if (pressed) {
      credit = 0;
      return 0;
    }
    credit += pace;
    const going = Math.min(waiting, Math.floor(credit));
    if (going < waiting) {
      credit -= going;
      pace += RELEASE_GROWTH;
    } else credit = 0;
    return going;
  };
};

/** Held writes in the order they came, each going at its latest start or earlier (the caller brings the time). */
export interface HeldQueue<T> {
  /** Holds `item` from `now` for at most `maxMs`. */
  join(item: T, now: number, maxMs: number): void;
  /** Takes `item` out (its client left). */
  leave(item: T): void;
  /** Takes those whose latest start has come, and `more` after them, in the order they came. */
  take(now: number, more: number): T[];
  readonly size: number;
}

/**
 * A new write goes at its bound at the latest, and each held before it at least `maxMs / n` (n held)
 * before the one after it. Writers answered by one commit come back together, and held each to its
 * own bound through a long press, they went together again 250 ms later: a wave of 64 writes owing
 * 640 deliveries in one instant, which a distributed dispatcher took 230 ms to send, and pressed
 * again for (`npm run bench -- sustained` with BENCH_ROLES=distributed: commits 70 at a time every
 * 200–300 ms through the first seconds of the burst, first attempts 100–230 ms after them). So they
 * go evenly over the bound instead. A write held alone still waits to its bound, and none waits
 * longer. Starts only move earlier, set as writes come, not at each look: recomputed from the
 * writes still held, the spacing widened as they went and let the rest go at once.
 */
export const heldQueue = <T>(): HeldQueue<T> => {
  /** Their starts rise in the order they came, so those that go are always the first few. */
  const held: { readonly item: T; start: number }[] = [];
  return {
    join(item, now, maxMs) {
      held.push({ item, start: now + maxMs });
      const gap = maxMs / held.length;
      for (let i = held.length - 2; i >= 0; i--) {
        const latest = held[i + 1]!.start - gap;
        // The ones before it were spaced when they joined.
        if (held[i]!.start <= latest) break;
        held[i]!.start = latest;
      }
    },
    leave(item) {
      const at = held.findIndex((entry) => entry.item === item);
      if (at >= 0) held.splice(at, 1);
    },
    take(now, more) {
      let due = 0;
      while (due < held.length && held[due]!.start <= now) due++;
      return held.splice(0, Math.min(held.length, due + more)).map((entry) => entry.item);
    },
    get size() {
      return held.length;
    },
  };
};

/** The request side over a deadline: one timer looks for every held request while any waits; `pace` says how many go a look. */
export const readBackpressure = (deadline: Deadline, nowMs: () => number = Date.now, pace = releasePace()): RequestSide => {
  /** Each held request's `done`. */
  const waiting = heldQueue<() => void>();
  let timer: NodeJS.Timeout | null = null;
  const pressed = (): boolean => nowMs() < deadline.read();
  const release = (all: boolean): void => {
    // At its latest start, a request goes whatever else holds; the pace lets the next few go.
    for (const done of waiting.take(nowMs(), all ? Infinity : pace(pressed(), waiting.size))) done();
    if (waiting.size === 0 && timer !== null) {
      clearInterval(timer);
      timer = null;
    }
  };
  const pressing = (): boolean => waiting.size > 0 || pressed();
  return {
    pressing,
    eased: (maxMs, gone) =>
      new Promise<void>((done) => {
        if (!pressing() || gone?.aborted === true) return done();
        const leave = (): void => {
          waiting.leave(waiter);
          done();
        };
        const waiter = (): void => {
          gone?.removeEventListener('abort', leave);
          done();
        };
        waiting.join(waiter, nowMs(), maxMs);
        gone?.addEventListener('abort', leave, { once: true });
        timer ??= setInterval(() => release(false), RECHECK_MS);
      }),
    clear() {
      deadline.clear();
      release(true);
    },
  };
};

/** Writes of workspaces with an active subscription wait while the side presses: one without adds nothing to deliver. */
export const holdingWrites = (side: RequestSide, directory: Pick<SubscriptionDirectory, 'list'>): WriteHold => ({
  held: (workspaceId) => side.pressing() && directory.list(workspaceId).some((row) => row.isActive),
  eased: side.eased,
});

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
