// Latency quantiles for the benchmarks' reports.
const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const round = (n: number) => Math.round(n * 10) / 10;

export const quantiles = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)), max: round(sorted.at(-1) ?? NaN), n: sorted.length };
};
