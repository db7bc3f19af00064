// Redis pub/sub Notifier for the distributed mode. One channel carries every workspace's
// announcements ("<offset> <workspaceId>"); each process holds one subscriber connection, subscribed
// once at start, and hands messages to its in-process listeners. A channel per workspace would
// SUBSCRIBE on every long poll, and an event published before that SUBSCRIBE took effect would be
// missed until the poll's timeout; one always-subscribed channel has no such window, and an
// announcement is a few bytes per process. ioredis re-subscribes after a reconnect; announcements
// during an outage are lost, which only delays the waiting polls to their timeout.
import { createRedisClient, redisReady } from '../shared/redis.js';
import { succeedsWithin } from '../shared/within.js';
import { createMemoryNotifier } from './memory.js';
import type { Notifier } from './notifier.js';

export interface RedisNotifierOptions {
  readonly url: string;
  /** Namespaces the channel (tests, several deployments on one Redis). */
  readonly channelPrefix?: string;
  /** How long to wait for Redis at start before going on without it (default 3 s). */
  readonly connectWaitMs?: number;
}

const CONNECT_WAIT_MS = 3_000;

/**
 * Resolves once subscribed, so no announcement after it is missed; or, when Redis cannot be reached
 * in time, at once: a process must start without it (long polls then answer at their timeout), and
 * the subscription is made when Redis comes.
 */
export const createRedisNotifier = async (options: RedisNotifierOptions): Promise<Notifier> => {
  const channel = `${options.channelPrefix ?? ''}feed`;
  const local = createMemoryNotifier();
  const publisher = createRedisClient(options.url, 'command');
  const subscriber = createRedisClient(options.url, 'subscriber');
  subscriber.on('message', (from: string, message: string) => {
    const space = message.indexOf(' ');
    if (from !== channel || space < 0) return;
    void local.publish(message.slice(space + 1), Number(message.slice(0, space)));
  });
  // A subscription still queued when the notifier closes fails; nobody waits for it then.
  const connected = Promise.all([subscriber.subscribe(channel), redisReady(publisher)]);
  if (!(await succeedsWithin(connected, options.connectWaitMs ?? CONNECT_WAIT_MS))) console.warn('updates: Redis cannot be reached; long polls answer at their timeout until it can');
  return {
    async publish(workspaceId, offset) {
      await publisher.publish(channel, `${offset} ${workspaceId}`);
    },
    subscribe: local.subscribe,
    async close() {
      subscriber.disconnect();
      publisher.disconnect();
      await local.close();
    },
  };
};
