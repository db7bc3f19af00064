// The billing clock: paid plans act at their expiry with no outside call. It keeps a due-list (each
// workspace's current expiry, ordered by time in a heap) and sleeps until the earliest one is due,
// never longer than `maxSleepMs` (a clock that jumps, a fake clock in tests). It never scans the
// log: the due-list is fed by a projection of the billing events that move an expiry (./feature.ts),
// rebuilt at start by a filtered read and then tailed, so an expiry set by any process is seen.
//
// Exactly once: `act` runs the renew command naming the expiry it acts on, and the billing decision
// answers nothing once the stream's expiry is no longer that one. A second attempt (a retry after a
// failure, a restart, another process with its own clock on the same log) finds the expiry moved, or
// loses the append race on the stream's expected revision, re-reads and decides nothing.
// An act that fails (the append threw, the log was busy) leaves the expiry due: it is tried again
// after `retryMs`, doubling up to a minute while it keeps failing.

export interface BillingClockOptions {
  /** Milliseconds since the epoch: the service clock. */
  readonly nowMs: () => number;
  /** Acts on `expiry` of the workspace's plan; throws when it could not (the expiry stays due). */
  readonly act: (workspaceId: string, expiry: string) => Promise<void>;
  readonly onError?: (error: unknown, workspaceId: string) => void;
  /** The longest sleep between two looks at the due-list (default 1 s). */
  readonly maxSleepMs?: number;
  /** The first pause before a failed act is tried again (default 1 s). */
  readonly retryMs?: number;
}

export interface BillingClock {
  /** The workspace's plan now ends at `expiry` (ISO 8601), or has no end (null: the entry plan). */
  set(workspaceId: string, expiry: string | null): void;
  /** How many workspaces have an expiry pending. */
  size(): number;
  start(): void;
  /** Stops after the act in progress, if any, has finished. */
  stop(): Promise<void>;
}

interface Due {
  readonly atMs: number;
  readonly workspaceId: string;
  readonly expiry: string;
  /** Which set() of the workspace this entry came from: a later one makes it stale. */
  readonly version: number;
  readonly failures: number;
}

const MAX_RETRY_MS = 60_000;

/** A binary min-heap on atMs; stale entries are skipped when they surface. */
const createHeap = () => {
  const items: Due[] = [];
  const swap = (i: number, j: number) => ([items[i], items[j]] = [items[j] as Due, items[i] as Due]);
  const at = (i: number) => (items[i] as Due).atMs;
  return {
    peek: (): Due | undefined => items[0],
    push(item: Due) {
      items.push(item);
      for (let i = items.length - 1; i > 0 && at((i - 1) >> 1) > at(i); i = (i - 1) >> 1) swap(i, (i - 1) >> 1);
    },
    pop(): Due | undefined {
      const top = items[0];
      const last = items.pop();
      if (items.length > 0 && last !== undefined) {
        items[0] = last;
        for (let i = 0; ; ) {
          const l = 2 * i + 1;
          const r = l + 1;
          let m = i;
          if (l < items.length && at(l) < at(m)) m = l;
          if (r < items.length && at(r) < at(m)) m = r;
          if (m === i) break;
          swap(i, m);
          i = m;
        }
      }
      return top;
    },
  };
};

export const createBillingClock = (options: BillingClockOptions): BillingClock => {
  const { nowMs, act, maxSleepMs = 1000, retryMs = 1000 } = options;
  const onError = options.onError ?? ((error: unknown, workspaceId: string) => console.error(`billing clock: workspace ${workspaceId}:`, error));
  const pending = new Map<string, { readonly expiry: string; readonly version: number }>();
  const heap = createHeap();
  let versions = 0;
  let running = false;
  let loop: Promise<void> | null = null;
  let wake: (() => void) | null = null;
  let sleepingUntil = Infinity;

  const current = (due: Due) => pending.get(due.workspaceId)?.version === due.version;

  const actOn = async (due: Due) => {
    try {
      await act(due.workspaceId, due.expiry);
      // Acted (or found acted): the projection brings the next expiry, if there is one.
      if (current(due)) pending.delete(due.workspaceId);
    } catch (error) {
      onError(error, due.workspaceId);
      if (current(due)) heap.push({ ...due, atMs: nowMs() + Math.min(MAX_RETRY_MS, retryMs * 2 ** due.failures), failures: due.failures + 1 });
    }
  };

  const run = async () => {
    while (running) {
      let top = heap.peek();
      while (running && top !== undefined && top.atMs <= nowMs()) {
        heap.pop();
        if (current(top)) await actOn(top);
        top = heap.peek();
      }
      if (!running) return;
      const sleepMs = Math.max(0, Math.min(maxSleepMs, (top?.atMs ?? Infinity) - nowMs()));
      sleepingUntil = nowMs() + sleepMs;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, sleepMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
      sleepingUntil = Infinity;
    }
  };

  return {
    set(workspaceId, expiry) {
      if (expiry === null) {
        pending.delete(workspaceId);
        return;
      }
      const atMs = Date.parse(expiry);
      const entry = { expiry, version: ++versions };
      pending.set(workspaceId, entry);
      heap.push({ atMs, workspaceId, expiry, version: entry.version, failures: 0 });
      if (atMs < sleepingUntil) wake?.();
    },
    size: () => pending.size,
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      wake?.();
      await loop;
    },
  };
};
