// How punctual the delivery engine is, as two Prometheus histograms kept where the engine runs (its
// worker thread embedded, each dispatcher process distributed) and served at /admin/v1/metrics:
//   webhook_fanout_delay_seconds            an event's commit → its fan-out to the subscriptions
//   webhook_attempt_start_delay_seconds     an attempt's due time → the moment its request goes out
// A first attempt falls due at its fan-out, so the two add up to commit → first attempt; a retry falls
// due at its scheduled time. They are measured by the engine, not at a receiver: a slow receiver or
// network adds nothing to them, and a busy engine shows in them at once.
/** first: a live delivery's first attempt; retry: any later attempt or a manual retry; replay: a replayed delivery's first attempt. */
export type AttemptKind = 'first' | 'retry' | 'replay';

/** One histogram series: counts per bucket (not cumulative; the last one past every bound), their sum in seconds, and how many. */
export interface SeriesFigures {
  readonly counts: number[];
  sum: number;
  count: number;
}

/** Plain data, so that a worker thread can hand it to the main thread as it is. */
export interface PunctualityFigures {
  readonly fanOut: SeriesFigures;
  readonly starts: Partial<Record<AttemptKind, SeriesFigures>>;
}

export interface Punctuality {
  /** An event fanned out `delayUs` after its commit. */
  fannedOut(delayUs: number): void;
  /** An attempt's request went out `delayUs` after it fell due. */
  started(kind: AttemptKind, delayUs: number): void;
  figures(): PunctualityFigures;
}

/**
 * Seconds. Fine below a second, where the engine's own promises lie (retries within 100 ms of their
 * due time, first attempts within 200 ms of the commit), coarse above it, where a backlog shows.
 */
export const PUNCTUALITY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5, 5, 10, 30, 60, 300] as const;

const series = (): SeriesFigures => ({ counts: new Array<number>(PUNCTUALITY_BUCKETS.length + 1).fill(0), sum: 0, count: 0 });

const observe = (into: SeriesFigures, delayUs: number): void => {
  const seconds = Math.max(0, delayUs) / 1_000_000;
  let bucket = 0;
  while (bucket < PUNCTUALITY_BUCKETS.length && seconds > (PUNCTUALITY_BUCKETS[bucket] as number)) bucket++;
  into.counts[bucket] = (into.counts[bucket] as number) + 1;
  into.sum += seconds;
  into.count += 1;
};

/**
 * Counted by hand, not with prom-client's Histogram, whose observe validates and hashes its labels on
 * every call: this runs once per attempt on the delivery engine's busiest path, in a thread whose
 * figures reach the registry of another (the main thread's) as data.
 */
export const createPunctuality = (): Punctuality => {
  const fanOut = series();
  const starts: Partial<Record<AttemptKind, SeriesFigures>> = {};
  return {
    fannedOut: (delayUs) => observe(fanOut, delayUs),
    started: (kind, delayUs) => observe((starts[kind] ??= series()), delayUs),
    figures: () => ({ fanOut, starts }),
  };
};

const FAN_OUT = {
  name: 'webhook_fanout_delay_seconds',
  help: "Seconds from an event's commit until the delivery engine fanned it out to the matching subscriptions.",
};
const START = {
  name: 'webhook_attempt_start_delay_seconds',
  help: 'Seconds from the time a webhook attempt fell due (a first attempt: its fan-out) until its request went out.',
};

/** A series' lines of the text format: cumulative buckets, sum and count. */
const seriesLines = (name: string, of: SeriesFigures, label: string): string[] => {
  const labels = label === '' ? '' : `,${label}`;
  let cumulative = 0;
  return [
    ...[...PUNCTUALITY_BUCKETS, '+Inf'].map((le, i) => `${name}_bucket{le="${le}"${labels}} ${(cumulative += of.counts[i] as number)}`),
    `${name}_sum${label === '' ? '' : `{${label}}`} ${of.sum}`,
    `${name}_count${label === '' ? '' : `{${label}}`} ${of.count}`,
  ];
};

/** The histograms in Prometheus' text format (version 0.0.4, as the rest of /admin/v1/metrics). */
export const punctualityText = (figures: PunctualityFigures): string => {
  const head = ({ name, help }: { name: string; help: string }) => [`# HELP ${name} ${help}`, `# TYPE ${name} histogram`];
  const starts = Object.entries(figures.starts) as [AttemptKind, SeriesFigures][];
  return [
    ...head(FAN_OUT),
    ...seriesLines(FAN_OUT.name, figures.fanOut, ''),
    ...head(START),
    ...starts.flatMap(([kind, of]) => seriesLines(START.name, of, `attempt="${kind}"`)),
    '',
  ].join('\n');
};
