// Replay leases in the Redis the dispatchers share (the port: ../replay-leases.ts): one key per replay
// holding its holder's id, with an expiry. Renewal and release touch the key only while it still names
// this holder, so a dispatcher that was too slow never takes back a lease another one holds now.
import { createRedisClient } from '../../../shared/redis.js';
import { randomId } from '../../../shared/ids.js';
import type { ReplayLeases } from '../replay-leases.js';

const RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";
const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

export const createRedisReplayLeases = (options: { readonly url: string; readonly ttlMs: number; readonly prefix?: string }): ReplayLeases => {
  const client = createRedisClient(options.url, 'background');
  const holder = randomId();
  const key = (replayId: string): string => `${options.prefix ?? 'webhook-replay-lease:'}${replayId}`;
  return {
    ttlMs: options.ttlMs,
    acquire: async (replayId) => (await client.set(key(replayId), holder, 'PX', options.ttlMs, 'NX')) === 'OK',
    renew: async (replayId) => Number(await client.eval(RENEW, 1, key(replayId), holder, String(options.ttlMs))) === 1,
    release: async (replayId) => void (await client.eval(RELEASE, 1, key(replayId), holder)),
    close: async () => client.disconnect(),
  };
};
