// Redis fixed-window rate limiter shared by every API server: one counter key per bucket, whose
// window opens at its first request (the key's expiry). Fails fast when Redis is away: hit() then
// rejects within the command timeout and the auth middleware lets the request through.
import type { Redis } from 'ioredis';
import { createRedisClient, redisReady } from '../shared/redis.js';
import type { RateLimiter } from './rate-limiter.js';

// One atomic step per request. The expiry is set whenever the key has none, i.e. on its first hit.
const HIT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

type WithHit = Redis & { rateLimitHit(key: string, windowMs: number): Promise<[number, number]> };

export interface RedisRateLimiterOptions {
  readonly url: string;
  readonly windowMs: number;
  /** Namespaces the counter keys (tests, several deployments on one Redis). */
  readonly keyPrefix?: string;
  readonly commandTimeoutMs?: number;
}

export interface RedisRateLimiter extends RateLimiter {
  /** Resolves once connected (hits before that reject, i.e. are not limited). */
  ready(): Promise<void>;
}

export const createRedisRateLimiter = (options: RedisRateLimiterOptions): RedisRateLimiter => {
  const client = createRedisClient(options.url, 'command', options.commandTimeoutMs === undefined ? {} : { commandTimeoutMs: options.commandTimeoutMs });
  client.defineCommand('rateLimitHit', { numberOfKeys: 1, lua: HIT });
  const prefix = `${options.keyPrefix ?? ''}rl:`;
  return {
    ready: () => redisReady(client),
    async hit(bucket, limit) {
      const [count, ttl] = await (client as WithHit).rateLimitHit(prefix + bucket, options.windowMs);
      return { allowed: count <= limit, retryAfterSeconds: Math.max(1, Math.ceil(ttl / 1000)) };
    },
    async close() {
      client.disconnect();
    },
  };
};
