// The writes an API held for webhook delivery (backpressure), read from its /admin/v1/metrics text:
// for the specs and the sustained bench alike. 0 where the counters are absent (nothing holds).
import type { HeldWrites } from '../../src/http/middleware/write-hold.js';

export const heldWritesIn = (metricsText: string): HeldWrites => {
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metricsText)?.[1] ?? 0);
  return { requests: value('http_writes_held_total'), seconds: value('http_writes_held_seconds_total') };
};
