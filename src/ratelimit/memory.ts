// In-process fixed-window rate limiter: each bucket's window opens at its first request and lasts
// windowMs. Expired buckets are swept lazily so memory follows the number of active clients.
import type { RateLimiter } from './rate-limiter.js';

export const createMemoryRateLimiter = (options: { windowMs: number; now?: () => number }): RateLimiter => {
  const now = options.now ?? Date.now;
  const buckets = new Map<string, { opened: number; count: number }>();
  let lastSweep = now();

  const sweep = (t: number) => {
    if (t - lastSweep < options.windowMs) return;
    lastSweep = t;
    for (const [name, bucket] of buckets) if (t - bucket.opened >= options.windowMs) buckets.delete(name);
  };

  return {
    async hit(bucket, limit) {
      const t = now();
      sweep(t);
      let window = buckets.get(bucket);
      if (window === undefined || t - window.opened >= options.windowMs) {
        window = { opened: t, count: 0 };
        buckets.set(bucket, window);
      }
      window.count += 1;
      const retryAfterSeconds = Math.max(1, Math.ceil((window.opened + options.windowMs - t) / 1000));
      return { allowed: window.count <= limit, retryAfterSeconds };
    },
    async close() {
      buckets.clear();
    },
  };
};
