// The distributed mode's backpressure (backpressure.ts) through Redis pub/sub: a dispatcher that
// presses publishes "<dispatcher> <ms>" on one channel at each look while it does, and "<dispatcher> 0"
// once when it stops; each API server keeps, per dispatcher, until when it presses, and holds writes
// while any one does. Durations cross the wire, not times: the hosts' clocks may differ. Nothing is
// stored: an API server that was not listening holds nothing, a publish that fails (Redis away)
// presses nothing, and the holds it heard run out by themselves within three of the dispatcher's periods.
import { randomUUID } from 'node:crypto';
import type { Core, Feature } from '../../app/core.js';
import { createRedisClient, redisReady } from '../../shared/redis.js';
import type { WebhookExtension } from '../feature.js';
import { holdingWrites, pressWhileBehind, readBackpressure, type Deadline, type DeliverySide, type Press } from './backpressure.js';

export interface BackpressureChannelOptions {
  readonly url: string;
  /** Namespaces the channel (tests, several deployments on one Redis). */
  readonly channelPrefix?: string;
}

const channelOf = (options: BackpressureChannelOptions): string => `${options.channelPrefix ?? ''}webhook-backpressure`;

/** A dispatcher's side: how it presses, under a name of its own. */
export const redisPress = (options: BackpressureChannelOptions): { readonly press: Press; readonly ready: Promise<void>; close(): Promise<void> } => {
  const channel = channelOf(options);
  const name = randomUUID();
  // A command connection: a press that cannot go now is dropped, not queued to arrive stale.
  const publisher = createRedisClient(options.url, 'command', { name: 'webhook-backpressure' });
  return {
    press: (forMs) => void publisher.publish(channel, `${name} ${Math.max(0, Math.round(forMs))}`).catch(() => undefined),
    ready: redisReady(publisher),
    // QUIT goes after what was sent (a stop's last word), unless the connection is down.
    close: () => publisher.quit().then(
      () => undefined,
      () => publisher.disconnect(),
    ),
  };
};

/** The longest hold one message may ask for: a bad or hostile message cannot hold writes for long. */
const MAX_PRESS_MS = 1_000;

/** An API server's side: the latest deadline any dispatcher asked for. */
export const listenForPressure = (options: BackpressureChannelOptions, nowMs: () => number = Date.now): Deadline & { readonly subscribed: Promise<void>; close(): void } => {
  const channel = channelOf(options);
  const until = new Map<string, number>();
  const subscriber = createRedisClient(options.url, 'subscriber', { name: 'webhook-backpressure-subscriber' });
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return;
    const space = message.indexOf(' ');
    const forMs = Number(message.slice(space + 1));
    if (space <= 0 || !Number.isFinite(forMs) || forMs < 0) return;
    const dispatcher = message.slice(0, space);
    if (forMs === 0) until.delete(dispatcher);
    else until.set(dispatcher, nowMs() + Math.min(forMs, MAX_PRESS_MS));
  });
  // Subscribed once Redis answers, and again after each reconnect (ioredis does it).
  const subscribed = subscriber.subscribe(channel).then(() => undefined);
  subscribed.catch(() => undefined);
  return {
    subscribed,
    read() {
      const now = nowMs();
      let latest = 0;
      for (const [dispatcher, at] of until) {
        if (at <= now) until.delete(dispatcher);
        else latest = Math.max(latest, at);
      }
      return latest;
    },
    clear: () => until.clear(),
    close: () => subscriber.disconnect(),
  };
};

/** While this dispatcher is behind and busy, the API servers hold writes (backpressure.ts, backpressure-redis.ts). */
export const pressApiServers = (core: Core, url: string, delivery: Feature): Feature => {
  const { lateMs } = core.config.webhooks.backpressure;
  let press: ReturnType<typeof redisPress> | null = null;
  let signal: DeliverySide | null = null;
  return {
    name: 'webhook-backpressure',
    async start() {
      const engine = delivery.deliveryEngine;
      if (lateMs === 0 || engine === undefined) return;
      press = redisPress({ url });
      signal = pressWhileBehind(press.press, engine, core.clock, lateMs);
    },
    async stop() {
      signal?.stop();
      await press?.close();
    },
  };
};

/** API servers hold writes while a dispatcher presses (REDIS_URL): a no-op where none does. */
export const holdForDispatchers =
  (url: string): WebhookExtension =>
  (_core, { directory }) => {
    let pressure: ReturnType<typeof listenForPressure> | null = null;
    const deadline: Deadline = { read: () => pressure?.read() ?? 0, clear: () => pressure?.clear() };
    return {
      writeHold: holdingWrites(readBackpressure(deadline), directory),
      start: async () => void (pressure = listenForPressure({ url })),
      stop: async () => pressure?.close(),
    };
  };
