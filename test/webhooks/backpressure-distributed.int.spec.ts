// Backpressure in the distributed mode, wired as the roles run it (src/webhooks/dispatch/
// backpressure-redis.ts), on a private Redis so that no other API server hears these presses: an
// API server (ROLE=api, REDIS_URL) holds the writes of its workspaces with subscriptions while a
// dispatcher presses, and nothing once it stops (or with WEBHOOK_BACKPRESSURE_LATE_MS=0); a
// dispatcher's feature presses while its engine is late and its event loop busy, never while idle.
import { expect } from 'chai';
import type { Core, Feature } from '../../src/app/core.js';
import { loadConfig } from '../../src/config/config.js';
import { systemMicros } from '../../src/log/clock.js';
import { listenForPressure, pressApiServers, redisPress } from '../../src/webhooks/dispatch/backpressure-redis.js';
import { heldWritesIn } from '../support/held-writes.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { startTestService, type TestService } from '../support/server.js';
import { eventually, metricLines, settle, subscribe } from '../support/webhooks-dispatch.js';

const ticket = { contact: { email: 'held@example.com' }, subject: 'Held?', message: 'Is this write held?' };

(redisServerInstalled() ? describe : describe.skip)('webhook delivery backpressure, distributed (int)', () => {
  let redis: PrivateRedis;
  const opened: { close(): void | Promise<void> }[] = [];

  before(async () => {
    redis = await startPrivateRedis();
  });
  after(async () => redis?.stop());
  afterEach(async () => {
    for (const c of opened.splice(0).reverse()) await c.close();
  });

  /** A dispatcher pressing every 20 ms, as one does while behind and busy, until `stop`. */
  const pressingDispatcher = async () => {
    const dispatcher = redisPress({ url: redis.url });
    await dispatcher.ready;
    const timer = setInterval(() => dispatcher.press(60), 20);
    const stop = () => {
      clearInterval(timer);
      dispatcher.press(0);
    };
    opened.push({ close: () => (stop(), dispatcher.close()) });
    return { stop };
  };

  const apiServer = async (env: Record<string, string> = {}): Promise<{ test: TestService; receiver: Receiver }> => {
    const receiver = await startReceiver();
    const test = await startTestService({ ROLE: 'api', REDIS_URL: redis.url, ...env });
    opened.push(receiver, test);
    return { test, receiver };
  };
  const held = async (test: TestService): Promise<number> => heldWritesIn((await metricLines(test, /^http_writes_held_/)).join('\n')).requests;

  it('an API server holds the writes of workspaces with subscriptions while a dispatcher presses, and none once it stops', async () => {
    const { test, receiver } = await apiServer();
    const ws = await test.createWorkspace();
    const quiet = await test.createWorkspace();
    await subscribe(ws, receiver.url);
    const dispatcher = await pressingDispatcher();
    await eventually('a held write', async () => {
      const before = await held(test);
      expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
      return (await held(test)) > before;
    });
    const before = await held(test);
    expect((await quiet.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
    expect((await ws.api('GET', '/api/v1/tickets')).status).to.equal(200);
    expect(await held(test), 'no subscription, or a read: not held').to.equal(before);

    dispatcher.stop();
    await settle(100);
    expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
    expect(await held(test), 'released').to.equal(before);
  });

  it('an API server with WEBHOOK_BACKPRESSURE_LATE_MS=0 holds nothing', async () => {
    const { test, receiver } = await apiServer({ WEBHOOK_BACKPRESSURE_LATE_MS: '0' });
    const ws = await test.createWorkspace();
    await subscribe(ws, receiver.url);
    await pressingDispatcher();
    await settle(100);
    for (let i = 0; i < 3; i++) expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
    expect((await metricLines(test, /^http_writes_held_total /)).length, 'no hold, no figures').to.equal(0);
  });

  /** A dispatcher's backpressure feature over an engine whose earliest waiting attempt is `lateMs` late. */
  const dispatcherFeature = async (lateMs: number): Promise<Feature> => {
    const config = loadConfig({ ROLE: 'dispatcher', REDIS_URL: redis.url });
    const engine: Feature = {
      name: 'engine',
      deliveryEngine: async () => ({
        backlog: { waiting: 5, oldestDueAt: systemMicros() - lateMs * 1000 },
        punctuality: { fanOut: { counts: [], sum: 0, count: 0 }, starts: {} },
      }),
    };
    const feature = pressApiServers({ config, clock: systemMicros } as unknown as Core, redis.url, engine);
    await feature.start?.();
    opened.push({ close: () => feature.stop?.() });
    return feature;
  };
  /** Keeps this thread's event loop busy for `ms`, in slices so its timers still run. */
  const busyFor = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const until = Date.now() + ms;
      const slice = (): void => {
        const end = Math.min(until, Date.now() + 20);
        while (Date.now() < end) {
          // Busy on purpose.
        }
        if (Date.now() < until) setImmediate(slice);
        else resolve();
      };
      slice();
    });

  /** What an API server listening read every 5 ms while this loop was busy for 300 ms beside a dispatcher whose engine is `lateMs` late. */
  const readWhileBusy = async (lateMs: number) => {
    const api = listenForPressure({ url: redis.url });
    opened.push(api);
    await api.subscribed;
    await dispatcherFeature(lateMs);
    const seen: number[] = [];
    const watch = setInterval(() => seen.push(api.read()), 5);
    await busyFor(300);
    await settle(50);
    clearInterval(watch);
    return { api, seen };
  };

  it('a dispatcher presses while its engine is late and its event loop busy, and not while idle', async () => {
    const { api, seen } = await readWhileBusy(500);
    expect(seen.some((deadline) => deadline > 0), 'pressed while busy').to.equal(true);
    // Late and idle (a slow receiver): released within its three periods, and nothing after.
    await settle(150);
    expect(api.read()).to.equal(0);
    await settle(200);
    expect(api.read()).to.equal(0);
  });

  it('a dispatcher on time presses nothing, however busy', async () => {
    const { seen } = await readWhileBusy(10);
    expect(seen.every((deadline) => deadline === 0)).to.equal(true);
  });
});
