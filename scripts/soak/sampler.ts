// What the soak samples from the service process each interval: resident memory, heap, open handles
// and event-loop delay from its own figures (GET /admin/v1/metrics, Prometheus' text format), and
// its open descriptors from /proc. The heap is the main thread's and the delivery thread's apart. And the judgement: a soak is flat when, after the warm-up, the
// last third of the samples stays near the first third.
import { readdirSync } from 'node:fs';

export interface Sample {
  readonly at_s: number;
  readonly rss_mb: number;
  readonly heap_used_mb: number;
  /** The webhook dispatcher thread's heap (null when the service reported none). */
  readonly worker_heap_used_mb: number | null;
  readonly active_handles: number;
  readonly open_fds: number;
  readonly event_loop_p99_ms: number;
}

const metricOrNull = (text: string, name: string): number | null => {
  const value = new RegExp(`^${name.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1];
  return value === undefined ? null : Number(value);
};

const metric = (text: string, name: string): number => {
  const value = metricOrNull(text, name);
  if (value === null) throw new Error(`the service's metrics have no ${name}`);
  return value;
};

const mb = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

export const sample = async (url: string, adminToken: string, pid: number, startedAt: number): Promise<Sample> => {
  const response = await fetch(`${url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${adminToken}` } });
  if (response.status !== 200) throw new Error(`GET /admin/v1/metrics answered ${response.status}`);
  const text = await response.text();
  return {
    at_s: Math.round((Date.now() - startedAt) / 1000),
    rss_mb: mb(metric(text, 'process_resident_memory_bytes')),
    heap_used_mb: mb(metric(text, 'nodejs_heap_size_used_bytes')),
    worker_heap_used_mb: ((bytes) => (bytes === null ? null : mb(bytes)))(metricOrNull(text, 'nodejs_worker_heap_size_used_bytes{thread="webhook-dispatcher"}')),
    active_handles: metric(text, 'nodejs_active_handles_total'),
    open_fds: readdirSync(`/proc/${pid}/fd`).length,
    event_loop_p99_ms: Math.round(metric(text, 'nodejs_eventloop_lag_p99_seconds') * 1000 * 10) / 10,
  };
};

/** How much the last third may exceed the first (after the first sample, the warm-up). */
export const TOLERANCE = { rss: 1.25, heap: 1.35, handles: 20, fds: 20 } as const;

const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);

export interface Flatness {
  readonly flat: boolean;
  readonly growth: { readonly rss: number; readonly heap: number; readonly worker_heap: number; readonly handles: number; readonly fds: number };
}

/**
 * Ratios for memory, differences for counts: the last third of the samples against the first. Memory
 * by the mean; descriptors and handles by the floor, as each sample also counts the connections open at
 * that instant (long polls, deliveries; 110 to 210 descriptors from one sample to the next), whereas a
 * leak raises the floor.
 */
export const flatness = (samples: readonly Sample[]): Flatness => {
  const settled = samples.slice(1);
  const third = Math.max(1, Math.floor(settled.length / 3));
  const [first, last] = [settled.slice(0, third), settled.slice(-third)];
  const of = (pick: (s: Sample) => number) => [mean(first.map(pick)), mean(last.map(pick))] as const;
  const [rss0, rss1] = of((s) => s.rss_mb);
  const [heap0, heap1] = of((s) => s.heap_used_mb);
  const [worker0, worker1] = of((s) => s.worker_heap_used_mb ?? 0);
  const floor = (pick: (s: Sample) => number) => [Math.min(...first.map(pick)), Math.min(...last.map(pick))] as const;
  const [h0, h1] = floor((s) => s.active_handles);
  const [f0, f1] = floor((s) => s.open_fds);
  const growth = {
    rss: Math.round((rss1 / rss0) * 100) / 100,
    heap: Math.round((heap1 / heap0) * 100) / 100,
    // No worker figures (a role without the thread): no growth.
    worker_heap: worker0 === 0 ? 1 : Math.round((worker1 / worker0) * 100) / 100,
    handles: Math.round(h1 - h0),
    fds: Math.round(f1 - f0),
  };
  return {
    flat: growth.rss <= TOLERANCE.rss && growth.heap <= TOLERANCE.heap && growth.worker_heap <= TOLERANCE.heap && growth.handles <= TOLERANCE.handles && growth.fds <= TOLERANCE.fds,
    growth,
  };
};
