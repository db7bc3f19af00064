// The delivery engine's own punctuality figures for a benchmark: its histograms at /admin/v1/metrics
// (src/webhooks/dispatch/punctuality.ts), summed over the processes that run an engine, read before
// and after a run. They measure when the engine fanned out and started each attempt, where a
// receiver's figures also hold the network and the receiver's own event loop.
const HISTOGRAMS = /^(webhook_fanout_delay_seconds|webhook_attempt_start_delay_seconds)_(bucket|count)(\{[^}]*\})? (\S+)$/;

/** `name_bucket{labels}` / `name_count{labels}` → value, summed over the engines. */
export type Tally = ReadonlyMap<string, number>;

/** A process's /admin/v1/metrics text (Prometheus exposition). */
export const metricsText = async (url: string, adminToken: string, signal?: AbortSignal): Promise<string> => {
  const reply = await fetch(`${url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${adminToken}` }, ...(signal === undefined ? {} : { signal }) });
  if (reply.status !== 200) throw new Error(`GET ${url}/admin/v1/metrics answered ${reply.status}`);
  return reply.text();
};

export const scrapePunctuality = async (urls: readonly string[], adminToken: string): Promise<Tally> => {
  const tally = new Map<string, number>();
  for (const url of urls) {
    for (const line of (await metricsText(url, adminToken)).split('\n')) {
      const match = HISTOGRAMS.exec(line);
      if (match === null) continue;
      const key = `${match[1]}_${match[2]}${match[3] ?? ''}`;
      tally.set(key, (tally.get(key) ?? 0) + Number(match[4]));
    }
  }
  return tally;
};

/** What was counted between two scrapes (engines that did not restart in between). */
export const since = (before: Tally, after: Tally): Tally => new Map([...after].map(([key, value]) => [key, value - (before.get(key) ?? 0)]));

export interface Punctual {
  readonly count: number;
  /** Share started within `withinS` of due (fanned out, for the fan-out histogram). */
  readonly within: number;
  /** The smallest bucket bound (ms) at or under which half fall: an upper bound of the median. */
  readonly p50AtMostMs: number;
  /** The smallest bucket bound (ms) at or under which 99% fall: an upper bound of the p99. */
  readonly p99AtMostMs: number;
}

/** One series of a histogram: `name` plus its labels (`attempt="retry"`), or none. */
export const punctual = (tally: Tally, name: string, label: string | null, withinS: number): Punctual => {
  const buckets = [...tally]
    .flatMap(([key, value]) => {
      const match = new RegExp(`^${name}_bucket\\{le="([^"]+)"${label === null ? '' : `,${label}`}\\}$`).exec(key);
      return match === null ? [] : [{ le: match[1] === '+Inf' ? Infinity : Number(match[1]), value }];
    })
    .sort((a, b) => a.le - b.le);
  const count = tally.get(`${name}_count${label === null ? '' : `{${label}}`}`) ?? 0;
  const at = (le: number) => buckets.find((b) => b.le === le)?.value ?? 0;
  const bound = (q: number) => (buckets.find((b) => b.value >= q * count)?.le ?? Infinity) * 1000;
  return { count, within: count === 0 ? NaN : at(withinS) / count, p50AtMostMs: bound(0.5), p99AtMostMs: bound(0.99) };
};
