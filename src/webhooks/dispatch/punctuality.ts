// How punctual the delivery engine is, as two Prometheus histograms kept where the engine runs (its
// worker thread embedded, each dispatcher process distributed) and served at /admin/v1/metrics:
//   webhook_fanout_delay_seconds            an event's commit → its fan-out to the subscriptions
//   webhook_attempt_start_delay_seconds     an attempt's due time → the moment its request goes out
// A first attempt falls due at its fan-out, so the two add up to commit → first attempt; a retry falls
// due at its scheduled time. They are measured by the engine, not at a receiver: a slow receiver or
// network adds nothing to them, and a busy engine shows in them at once.
import { AggregatorRegistry, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** first: a live delivery's first attempt; retry: any later attempt or a manual retry; replay: a replayed delivery's first attempt. */
export type AttemptKind = 'first' | 'retry' | 'replay';

/** The histograms as prom-client's JSON: what a worker thread hands the main thread. */
export type PunctualityFigures = MetricObjectWithValues<MetricValue<string>>[];

export interface Punctuality {
  /** An event fanned out `delayUs` after its commit. */
  fannedOut(delayUs: number): void;
  /** An attempt's request went out `delayUs` after it fell due. */
  started(kind: AttemptKind, delayUs: number): void;
  figures(): Promise<PunctualityFigures>;
}

/**
 * Seconds. Fine below a second, where the engine's own promises lie (retries within 100 ms of their
 * due time, first attempts within 200 ms of the commit), coarse above it, where a backlog shows.
 */
export const PUNCTUALITY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10, 30, 60, 300] as const;

const seconds = (delayUs: number): number => Math.max(0, delayUs) / 1_000_000;

export const createPunctuality = (): Punctuality => {
  const registry = new Registry();
  const fanOut = new Histogram({
    name: 'webhook_fanout_delay_seconds',
    help: "Seconds from an event's commit until the delivery engine fanned it out to the matching subscriptions.",
    buckets: [...PUNCTUALITY_BUCKETS],
    registers: [registry],
  });
  const start = new Histogram({
    name: 'webhook_attempt_start_delay_seconds',
    help: 'Seconds from the time a webhook attempt fell due (a first attempt: its fan-out) until its request went out.',
    labelNames: ['attempt'],
    buckets: [...PUNCTUALITY_BUCKETS],
    registers: [registry],
  });
  return {
    fannedOut: (delayUs) => fanOut.observe(seconds(delayUs)),
    started: (kind, delayUs) => start.observe({ attempt: kind }, seconds(delayUs)),
    figures: () => registry.getMetricsAsJSON(),
  };
};

/** The engine's histograms as a registry of the process serving the metrics (a worker's are plain JSON there). */
export const punctualityRegistry = (figures: PunctualityFigures): Registry => AggregatorRegistry.aggregate([figures]);
