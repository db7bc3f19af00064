// The RateLimiter port: fixed one-minute windows that open at a bucket's first request (spec "Limits").
export interface RateDecision {
  readonly allowed: boolean;
  /** Whole seconds until the bucket's window opens again (>= 1 when refused). */
  readonly retryAfterSeconds: number;
}

export interface RateLimiter {
  /** Counts one request against `bucket` (e.g. `key:<id>` or `ip:<addr>`) whose limit is `limit` per window. */
  hit(bucket: string, limit: number): Promise<RateDecision>;
  close(): Promise<void>;
}
