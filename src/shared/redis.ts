// The one place that opens ioredis connections, so every adapter gets the same outage behaviour.
import { Redis } from 'ioredis';

export type RedisRole =
  /** Request-path commands (rate limits, publishes, schedule): fail fast rather than queue while Redis is away. */
  | 'command'
  /** Background batch work (the shared retry schedule): queued until connected, re-sent after a reconnect, generous timeout. */
  | 'background'
  /** A pub/sub connection: SUBSCRIBE is queued until connected and re-sent after every reconnect. */
  | 'subscriber';

const RETRY_MAX_MS = 2_000;

/** `name`: the connection's name in Redis' CLIENT LIST (set at each connect), for an operator to tell connections apart. */
export const createRedisClient = (url: string, role: RedisRole, options: { commandTimeoutMs?: number; name?: string } = {}): Redis => {
  const client = new Redis(url, {
    ...(options.name === undefined ? {} : { connectionName: options.name }),
    connectTimeout: 1_000,
    // Reconnects forever in the background, backing off to one try every 2 s.
    retryStrategy: (times) => Math.min(times * 100, RETRY_MAX_MS),
    ...(role === 'command'
      ? { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: options.commandTimeoutMs ?? 200 }
      : role === 'background'
        ? { enableOfflineQueue: true, maxRetriesPerRequest: 3, commandTimeout: options.commandTimeoutMs ?? 10_000 }
        : { enableOfflineQueue: true, maxRetriesPerRequest: null, autoResubscribe: true }),
  });
  // Without a listener ioredis prints every failed reconnect; callers report outages where they matter.
  client.on('error', () => undefined);
  return client;
};

/** Resolves once the client can take commands (a `command` client refuses them before that). */
export const redisReady = (client: Redis): Promise<void> =>
  client.status === 'ready' ? Promise.resolve() : new Promise((resolve) => client.once('ready', () => resolve()));
