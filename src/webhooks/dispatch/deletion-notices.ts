// A DELETE tells the distributed mode's dispatchers (Redis pub/sub), as the embedded mode tells its
// worker thread (thread.ts), and answers once each has stopped sending to the subscription. Without
// it, a dispatcher whose check of the log came just before the marker, and whose event loop then
// stalled, could send after the answer (the likely cause of what the distributed crash torture
// found under CPU pressure: deliveries 1.1 s after their DELETE). The API server publishes
// "<notice id> <subscription id>" and waits, at most `waitMs`, for an acknowledgement from each
// dispatcher that received it (PUBLISH counts them) and from each one it knows to be alive.
// Knowing who is alive is what covers the dispatchers PUBLISH cannot count: one whose subscriber is
// reconnecting (Redis restarted), or every one while Redis is away. Each dispatcher says it is alive
// every HEARTBEAT_MS on a presence channel, and gone when it stops; the API server keeps who it heard
// in memory (a Redis restarted empty loses nothing of it). It cannot hear anyone while its own
// subscription is down, so a dispatcher's silence counts only from when it is back: a dispatcher
// whose commands reconnected first takes work again (a re-seed of a lost schedule) while neither
// its heartbeats nor PUBLISH reach the API server yet, and a DELETE then must still wait for it.
// An API server that has not heard a dispatcher (it started, or its subscription came back, after
// that dispatcher's last heartbeat) reads who is present from Redis: each heartbeat also scores the
// dispatcher in a sorted set by Redis's own clock, and the notice's script returns those scored in
// the last ALIVE_MS. A dispatcher starts no attempt before its presence is in the Redis it can be
// told through (`reachable`: written since its connection last came up), so one that took work
// after a Redis restart is in that Redis's set before its first look at the log.
// Each notice is also kept in Redis for RECENT_MS, and a dispatcher reads them after every
// (re)subscription: one that was reconnecting acts on what it missed and acknowledges it. A
// dispatcher that cannot answer in time (stalled, or killed and still counted alive for ALIVE_MS)
// is not waited for longer than the bound; its check of the log before each attempt still meets
// the marker.
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
  /** How long a dispatcher's `reachable` waits at most (default REACHABLE_WAIT_MS). */
  readonly reachableWaitMs?: number;
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
  /**
   * Null while a DELETE can reach this dispatcher (its presence, written lately, is in the Redis it
   * is connected to); else resolves once it can, or after at most REACHABLE_WAIT_MS (Redis away: the
   * log still decides).
   */
  reachable(): Promise<void> | null;
  close(): void;
}

const CONNECT_WAIT_MS = 3_000;

/** How long a DELETE waits for the dispatchers (a worker thread, or the dispatcher roles) to stop sending to its subscription. */
export const DELETION_WAIT_MS = 2_000;

/** How often a dispatcher says it is alive. */
const HEARTBEAT_MS = 1_000;

/**
 * How long an API server that listens counts a dispatcher alive after hearing from it (or after it
 * could hear again): several heartbeats. A dispatcher unheard for longer while it could have been
 * heard has had no claim on the shared schedule (in Redis too) for as long, so nothing of it can be
 * under way.
 */
const ALIVE_MS = 5_000;

/** How long an API server remembers a dispatcher it has not heard from, whatever its subscription's outages. */
const FORGET_MS = 10 * 60_000;

/** How long the presence set keeps a dispatcher unheard (an API server reads only its last aliveMs). */
const PRESENCE_KEEP_MS = 60_000;

/** How long an attempt waits for its dispatcher's presence to be written again (below any claim's lease). */
const REACHABLE_WAIT_MS = 2_000;

/** How long a dispatcher counts on its last presence write: well inside ALIVE_MS, within which a DELETE reads it. */
const PRESENCE_FRESH_MS = ALIVE_MS - 1_000;

/** How long a notice is kept for the dispatchers that were reconnecting when it was published, and how many at most. */
const RECENT_MS = 60_000;
const RECENT_MAX = 10_000;

const keys = (options: DeletionNoticeOptions) => ({
  notices: `${options.channelPrefix ?? ''}webhook-deletions`,
  acks: `${options.channelPrefix ?? ''}webhook-deletion-acks`,
  presence: `${options.channelPrefix ?? ''}webhook-dispatchers`,
  present: `${options.channelPrefix ?? ''}webhook-dispatchers-present`,
  recent: `${options.channelPrefix ?? ''}webhook-deletions-recent`,
});

/** Redis's clock in ms: every server scores by the same clock, whatever the skew between hosts. */
const NOW_MS = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Scores the dispatcher ARGV[1] present (KEYS[1]), forgets those unheard for ARGV[2] ms, says it is alive (KEYS[2]). */
const PRESENT = `${NOW_MS}redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return redis.call('PUBLISH', KEYS[2], ARGV[1])`;

/**
 * Keeps the notice ARGV[1] among the recent ones (KEYS[1], ARGV[2] ms, ARGV[3] at most), publishes it
 * (KEYS[2]), and returns how many received it and the dispatchers present (KEYS[3]) in the last ARGV[4] ms.
 */
const TELL = `${NOW_MS}redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('ZREMRANGEBYRANK', KEYS[1], 0, -tonumber(ARGV[3]) - 1)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local receivers = redis.call('PUBLISH', KEYS[2], ARGV[1])
return {receivers, redis.call('ZRANGEBYSCORE', KEYS[3], now - tonumber(ARGV[4]), '+inf')}`;

type Scripted = Redis & {
  tellDeletion(...args: (string | number)[]): Promise<[number, string[]]>;
  sayPresent(...args: (string | number)[]): Promise<number>;
};

/**
 * Subscribes to `channels` once Redis is there (`subscription`), and again after each reconnect;
 * `subscribed` runs after each time the subscription is in place, the first included.
 */
const connect = (
  options: DeletionNoticeOptions,
  side: 'api' | 'dispatcher',
  channels: readonly string[],
  onMessage: (channel: string, message: string) => void,
  subscribed?: () => Promise<void> | void,
  unsubscribed?: () => void,
) => {
  const publisher = createRedisClient(options.url, 'command', { name: `webhook-deletions-${side}` }) as Scripted;
  publisher.defineCommand('tellDeletion', { numberOfKeys: 3, lua: TELL });
  publisher.defineCommand('sayPresent', { numberOfKeys: 2, lua: PRESENT });
  const subscriber = createRedisClient(options.url, 'subscriber', { name: `webhook-deletions-${side}-subscriber` });
  subscriber.on('message', onMessage);
  if (unsubscribed !== undefined) subscriber.on('close', unsubscribed);
  // SUBSCRIBE answers in order on its connection: once it has, nothing published after is missed.
  const subscribe = () => Promise.all([subscriber.subscribe(...channels), redisReady(publisher)]).then(() => subscribed?.());
  const subscription = subscribe();
  // ioredis subscribes again by itself after a reconnect; this waits for it to know when it is done.
  let first = true;
  subscriber.on('ready', () => {
    if (first) first = false;
    else subscribe().catch(() => undefined);
  });
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
export const createRedisDeletionNotices = (options: DeletionNoticeOptions & { readonly waitMs: number; readonly aliveMs?: number }): DeletionNotices => {
  const { notices, acks, presence, present, recent } = keys(options);
  const aliveMs = options.aliveMs ?? ALIVE_MS;
  /** Per notice waiting for its acknowledgements: called with each acknowledging dispatcher. */
  const waiting = new Map<string, (dispatcher: string) => void>();
  /** Each dispatcher heard from, and when (performance.now()). */
  const heard = new Map<string, number>();
  /** Whether this server's subscription is in place, and since when (performance.now()). */
  let listening = false;
  let listeningSince = 0;
  const { publisher, subscription, close } = connect(
    options,
    'api',
    [acks, presence],
    (channel, message) => {
      const space = message.indexOf(' ');
      if (channel === presence) {
        if (space < 0) heard.set(message, performance.now());
        else heard.delete(message.slice(0, space));
      } else if (channel === acks && space > 0) {
        heard.set(message.slice(space + 1), performance.now());
        waiting.get(message.slice(0, space))?.(message.slice(space + 1));
      }
    },
    () => {
      listening = true;
      listeningSince = performance.now();
    },
    () => void (listening = false),
  );
  /** Those heard within aliveMs of listening: the time this server could not hear does not count against them. */
  const alive = (): Set<string> => {
    const now = performance.now();
    const out = new Set<string>();
    for (const [dispatcher, at] of heard) {
      if (at < now - FORGET_MS) heard.delete(dispatcher);
      else if (!listening || Math.max(at, listeningSince) >= now - aliveMs) out.add(dispatcher);
    }
    return out;
  };
  /** Kept for the dispatchers that are reconnecting, and published to those listening: how many those are, and who is present. */
  const publish = async (notice: string): Promise<{ readonly receivers: number; readonly present: readonly string[] }> => {
    const [receivers, names] = await publisher.tellDeletion(recent, notices, present, notice, RECENT_MS, RECENT_MAX, aliveMs);
    return { receivers, present: names };
  };
  return {
    async tell(subscriptionId) {
      const id = randomUUID();
      const expected = alive();
      const acknowledged = new Set<string>();
      let receivers = Infinity;
      let done = (): void => undefined;
      const all = new Promise<void>((resolve) => (done = resolve));
      // Every dispatcher PUBLISH reached (the count) and every one known alive (by name), acknowledgements coming in before PUBLISH's answer included.
      const check = (): void => {
        if (acknowledged.size >= receivers && [...expected].every((dispatcher) => acknowledged.has(dispatcher))) done();
      };
      waiting.set(id, (dispatcher) => {
        acknowledged.add(dispatcher);
        check();
      });
      // One bound for the whole wait, however it is spent.
      const deadline = performance.now() + options.waitMs;
      const left = () => Math.max(0, deadline - performance.now());
      try {
        // Acknowledgements are heard only once subscribed to them (at start, or after an outage).
        if (!(await succeedsWithin(subscription, left()))) throw new Error('Redis cannot be reached');
        const told = await publish(`${id} ${subscriptionId}`);
        receivers = told.receivers;
        // Those this server has not heard (yet) but that are present: they may be taking work.
        for (const dispatcher of told.present) expected.add(dispatcher);
        check();
        await succeedsWithin(all, left());
      } catch (error) {
        console.warn(`webhook ${subscriptionId}: the dispatchers could not be told of its deletion (${String(error)}); they meet it in the log`);
        // Those alive get the bound to get there: an attempt whose look at the log came before the marker goes out before the answer.
        if (expected.size > 0) await new Promise((resolve) => setTimeout(resolve, left()));
      } finally {
        waiting.delete(id);
      }
    },
    close,
  };
};

export const createRedisDeletionListener = (options: DeletionNoticeOptions): DeletionListener => {
  const { notices, acks, presence, present, recent } = keys(options);
  /** This dispatcher's name in acknowledgements, on the presence channel and in the presence set: one per process lifetime. */
  const name = randomUUID();
  /** The notices acted on, and when (Date.now()): a notice read again from the recent ones is acknowledged, not acted on twice. */
  const acted = new Map<string, number>();
  let connection: ReturnType<typeof connect> | null = null;
  let heartbeat: NodeJS.Timeout | null = null;
  /** When (performance.now()) the last presence write that succeeded was sent, since the command connection last came up; null when none. */
  let presentAt: number | null = null;
  /** What attempts wait on while it is not, resolved once it is (or by the wait's bound). */
  let presenceWritten: { readonly promise: Promise<void>; readonly resolve: () => void } | null = null;
  let warned = false;
  const written = (sentAt: number): void => {
    presentAt = sentAt;
    warned = false;
    presenceWritten?.resolve();
    presenceWritten = null;
  };
  /** Scores it present by Redis's clock and says it is alive; unanswered while Redis is away (the next heartbeat tries again). */
  const alive = async (): Promise<void> => {
    if (connection === null) return;
    const sentAt = performance.now();
    try {
      await connection.publisher.sayPresent(present, presence, name, PRESENCE_KEEP_MS);
      written(sentAt);
    } catch {
      // Counted alive by the API servers that heard it; a new Redis learns of it at the next heartbeat.
    }
  };
  return {
    /** Resolves once subscribed, so no DELETE after it is missed, or after a few seconds without Redis (subscribed when it comes). */
    async listen(deleted) {
      const act = (notice: string): void => {
        const space = notice.indexOf(' ');
        if (space < 0) return;
        const id = notice.slice(0, space);
        if (!acted.has(id)) {
          acted.set(id, Date.now());
          deleted(notice.slice(space + 1));
        }
        // Unanswered when Redis is away: the API server waits out its bound.
        connection?.publisher.publish(acks, `${id} ${name}`).catch(() => undefined);
      };
      // The notices published while this one was not subscribed: at start, or reconnecting.
      const catchUp = async (): Promise<void> => {
        await alive();
        const since = Date.now() - 2 * RECENT_MS;
        for (const [id, at] of acted) if (at < since) acted.delete(id);
        const missed = await (connection?.publisher.zrange(recent, 0, -1) ?? Promise.resolve([])).catch((error: unknown) => {
          console.warn(`webhooks: the DELETEs answered while not subscribed could not be read (${String(error)}); they are met in the log`);
          return [];
        });
        for (const notice of missed) act(notice);
      };
      connection = connect(options, 'dispatcher', [notices], (_, notice) => act(notice), catchUp);
      // A Redis restarted empty has no presence of it: none is written until the connection is back, at once then.
      connection.publisher.on('close', () => void (presentAt = null));
      connection.publisher.on('ready', () => void alive());
      heartbeat = setInterval(() => void alive(), HEARTBEAT_MS).unref();
      if (!(await succeedsWithin(connection.subscription, options.connectWaitMs ?? CONNECT_WAIT_MS))) console.warn('webhooks: Redis cannot be reached; DELETEs answered meanwhile are met in the log');
    },
    reachable() {
      // Heartbeats that stopped succeeding (Redis slow, not closed) age it out of what a DELETE reads.
      if (presentAt !== null && performance.now() - presentAt < PRESENCE_FRESH_MS) return null;
      if (presenceWritten === null) {
        let resolve = (): void => undefined;
        const promise = new Promise<void>((done) => (resolve = done));
        const waiting = { promise, resolve };
        presenceWritten = waiting;
        setTimeout(() => {
          if (presenceWritten !== waiting) return;
          presenceWritten = null;
          if (!warned) console.warn('webhooks: attempts go on although a DELETE cannot reach this dispatcher (Redis away); the log still decides before each one');
          warned = true;
          resolve();
        }, options.reachableWaitMs ?? REACHABLE_WAIT_MS).unref();
      }
      return presenceWritten.promise;
    },
    close() {
      if (heartbeat !== null) clearInterval(heartbeat);
      const leaving = connection;
      // Gone for good: an API server does not wait for it until it is no longer counted alive.
      void leaving?.publisher
        .multi()
        .zrem(present, name)
        .publish(presence, `${name} gone`)
        .exec()
        .catch(() => undefined)
        .finally(() => leaving.close());
    },
  };
};
