// Redis pub/sub Notifier for the distributed mode. One channel carries every workspace's
// announcements ("<offset> <workspaceId>"); each process holds one subscriber connection, subscribed
// once at start, and hands messages to its in-process listeners. A channel per workspace would
// SUBSCRIBE on every long poll, and an event published before that SUBSCRIBE took effect would be
// missed until the poll's timeout; one always-subscribed channel has no such window, and an
// announcement is a few bytes per process. ioredis re-subscribes after a reconnect; announcements
// during an outage are lost, which only delays the waiting polls to their timeout.
import { createRedisClient, redisReady } from '../shared/redis.js';
import { createMemoryNotifier } from './memory.js';
import type { Notifier } from './notifier.js';

export interface RedisNotifierOptions {
  readonly url: string;
  /** Namespaces the channel (tests, several deployments on one Redis). */
  readonly channelPrefix?: string;
}

/** Resolves once subscribed, so no announcement after it is missed. */
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
  await Promise.all([subscriber.subscribe(channel), redisReady(publisher)]);
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
