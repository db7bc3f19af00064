// A DELETE tells the distributed mode's dispatchers (Redis pub/sub), as the embedded mode tells its
// worker thread (thread.ts), and answers once each has stopped sending to the subscription. Without
// it, a dispatcher whose check of the log came just before the marker, and whose event loop then
// stalled, could send after the answer (the likely cause of what the distributed crash torture
// found under CPU pressure: deliveries 1.1 s after their DELETE). Each dispatcher keeps a subscriber
// connection on the notices channel; the API server publishes "<notice id> <subscription id>",
// learns from PUBLISH how many dispatchers received it, and waits for as many acknowledgements, at
// most `waitMs`. A dispatcher that cannot answer in time (stalled, or gone after the publish) is not
// waited for longer, nor is an unreachable Redis: its check of the log before each attempt still
// meets the marker.
import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { createRedisClient, redisReady } from '../../shared/redis.js';
import { succeedsWithin } from '../../shared/within.js';

export interface DeletionNoticeOptions {
  readonly url: string;
  /** Namespaces the channels (tests, several deployments on one Redis). */
  readonly channelPrefix?: string;
  /** How long a dispatcher's `listen` waits for Redis before going on without it (default 3 s). */
  readonly connectWaitMs?: number;
}

/** The API server's side. */
export interface DeletionNotices {
  /** Resolves once every dispatcher that received the notice has acknowledged it, or after `waitMs`. */
  tell(subscriptionId: string): Promise<void>;
  close(): void;
}

/** The dispatcher's side. */
export interface DeletionListener {
  /** `deleted` is called as each notice arrives; the notice is acknowledged as soon as it returns. */
  listen(deleted: (subscriptionId: string) => void): Promise<void>;
  close(): void;
}

const CONNECT_WAIT_MS = 3_000;

/** How long a DELETE waits for the dispatchers (a worker thread, or the dispatcher roles) to stop sending to its subscription. */
export const DELETION_WAIT_MS = 2_000;

const channels = (options: DeletionNoticeOptions) => ({
  notices: `${options.channelPrefix ?? ''}webhook-deletions`,
  acks: `${options.channelPrefix ?? ''}webhook-deletion-acks`,
});

/** Subscribes to `channel` once Redis is there (`subscription`). */
const connect = (options: DeletionNoticeOptions, channel: string, onMessage: (message: string, publisher: Redis) => void) => {
  const publisher = createRedisClient(options.url, 'command');
  const subscriber = createRedisClient(options.url, 'subscriber');
  subscriber.on('message', (from: string, message: string) => {
    if (from === channel) onMessage(message, publisher);
  });
  const subscription = Promise.all([subscriber.subscribe(channel), redisReady(publisher)]);
  // A subscription still queued when the connection closes fails; nobody waits for it then.
  subscription.catch(() => undefined);
  return {
    publisher,
    subscription,
    close(): void {
      subscriber.disconnect();
      publisher.disconnect();
    },
  };
};

/** Starts without waiting for Redis: an API server serves what does not need it. */
export const createRedisDeletionNotices = (options: DeletionNoticeOptions & { readonly waitMs: number }): DeletionNotices => {
  const { notices, acks } = channels(options);
  /** Per notice waiting for its acknowledgements: called once per acknowledgement. */
  const waiting = new Map<string, () => void>();
  const { publisher, subscription, close } = connect(options, acks, (id) => waiting.get(id)?.());
  return {
    async tell(subscriptionId) {
      const id = randomUUID();
      let acknowledged = 0;
      let receivers = Infinity;
      let done = (): void => undefined;
      const all = new Promise<void>((resolve) => (done = resolve));
      // An acknowledgement may come in before PUBLISH's answer: both are counted, in either order.
      waiting.set(id, () => {
        if (++acknowledged >= receivers) done();
      });
      // One bound for the whole wait, however it is spent.
      const deadline = performance.now() + options.waitMs;
      const left = () => Math.max(0, deadline - performance.now());
      try {
        // Acknowledgements are heard only once subscribed to them (at start, or after an outage).
        if (!(await succeedsWithin(subscription, left()))) throw new Error('Redis cannot be reached');
        receivers = await publisher.publish(notices, `${id} ${subscriptionId}`);
        if (acknowledged >= receivers) done();
        await succeedsWithin(all, left());
      } catch (error) {
        console.warn(`webhook ${subscriptionId}: the dispatchers could not be told of its deletion (${String(error)}); they meet it in the log`);
      } finally {
        waiting.delete(id);
      }
    },
    close,
  };
};

export const createRedisDeletionListener = (options: DeletionNoticeOptions): DeletionListener => {
  const { notices, acks } = channels(options);
  let connection: ReturnType<typeof connect> | null = null;
  return {
    /** Resolves once subscribed, so no DELETE after it is missed, or after a few seconds without Redis (subscribed when it comes). */
    async listen(deleted) {
      connection = connect(options, notices, (message, publisher) => {
        const space = message.indexOf(' ');
        if (space < 0) return;
        deleted(message.slice(space + 1));
        // Unanswered when Redis is away: the API server waits out its bound.
        publisher.publish(acks, message.slice(0, space)).catch(() => undefined);
      });
      if (!(await succeedsWithin(connection.subscription, options.connectWaitMs ?? CONNECT_WAIT_MS))) console.warn('webhooks: Redis cannot be reached; DELETEs answered meanwhile are met in the log');
    },
    close: () => connection?.close(),
  };
};
