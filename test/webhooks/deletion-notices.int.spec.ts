// Deletions told to the dispatchers over Redis (src/webhooks/dispatch/deletion-notices.ts): an API
// server's DELETE waits until every dispatcher that received the notice, and every one known to be
// alive, has acted on it, at most a bound; a dispatcher that was reconnecting acts on the notice it
// missed; one that cannot answer, or a Redis that is away, costs the bound and no more.
import { expect } from 'chai';
import { performance } from 'node:perf_hooks';
import { createRedisDeletionListener, createRedisDeletionNotices, type DeletionListener, type DeletionNotices } from '../../src/webhooks/dispatch/deletion-notices.js';
import { createRedisClient, redisReady } from '../../src/shared/redis.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';

const redisUrl = process.env['REDIS_URL'];
/** Longer than mocha's timeout: a test that resolves did not wait for it. */
const NEVER_MS = 60_000;

(redisUrl === undefined ? describe.skip : describe)('deletion notices over Redis (int)', function () {
  this.timeout(10_000);
  const url = redisUrl as string;
  let channelPrefix: string;
  const opened: { close(): void }[] = [];
  const notices = (waitMs: number, extra: { url?: string } = {}): DeletionNotices => {
    const created = createRedisDeletionNotices({ url, channelPrefix, waitMs, ...extra });
    opened.push(created);
    return created;
  };
  const listener = async (deleted: (subscriptionId: string) => void): Promise<DeletionListener> => {
    const created = createRedisDeletionListener({ url, channelPrefix });
    opened.push(created);
    await created.listen(deleted);
    return created;
  };

  /** Drops the pub/sub connections of that name (ioredis connects them again after 100 ms). */
  const killSubscribers = async (name: string): Promise<void> => {
    const admin = createRedisClient(url, 'command');
    try {
      await redisReady(admin);
      const clients = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
      const ids = [...clients.matchAll(new RegExp(`^id=(\\d+) .*name=${name} `, 'gm'))].map((m) => m[1] as string);
      expect(ids).to.have.length.at.least(1);
      for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id);
    } finally {
      admin.disconnect();
    }
  };

  beforeEach(() => {
    channelPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  });
  afterEach(() => {
    for (const c of opened.splice(0)) c.close();
  });

  it('answers once every dispatcher has been told, each before the answer', async () => {
    const told: string[] = [];
    await listener((id) => told.push(`1:${id}`));
    await listener((id) => told.push(`2:${id}`));
    const api = notices(NEVER_MS);
    await api.tell('sub-a');
    expect([...told].sort()).to.deep.equal(['1:sub-a', '2:sub-a']);
    await api.tell('sub-b');
    expect(told).to.have.length(4);
  });

  it('answers at once when no dispatcher listens', async () => {
    const api = notices(NEVER_MS);
    await api.tell('sub-a');
  });

  it('tells the dispatchers of concurrent DELETEs on several API servers, each answered by its own acknowledgements', async () => {
    const told: string[] = [];
    await listener((id) => told.push(id));
    const [a, b] = [notices(NEVER_MS), notices(NEVER_MS)];
    const ids = Array.from({ length: 20 }, (_, i) => `sub-${i}`);
    await Promise.all(ids.map((id, i) => (i % 2 === 0 ? a : b).tell(id)));
    expect([...told].sort()).to.deep.equal([...ids].sort());
  });

  it('waits out its bound for a dispatcher that received the notice and does not answer (stalled), then answers', async () => {
    // A subscriber on the notices channel that never acknowledges: a dispatcher whose event loop is stuck.
    const stalled = createRedisClient(url, 'subscriber');
    try {
      await stalled.subscribe(`${channelPrefix}webhook-deletions`);
      const told: string[] = [];
      await listener((id) => told.push(id));
      const api = notices(400);
      const started = performance.now();
      await api.tell('sub-a');
      expect(performance.now() - started, 'waited for the stalled one').to.be.at.least(350);
      expect(told).to.deep.equal(['sub-a']);
    } finally {
      stalled.disconnect();
    }
  });

  it('answers after its bound, without throwing, when Redis cannot be reached', async () => {
    // A port nothing listens on.
    const api = notices(300, { url: 'redis://127.0.0.1:1' });
    const started = performance.now();
    await api.tell('sub-a');
    expect(performance.now() - started).to.be.at.least(250);
  });

  it('waits for a dispatcher known alive whose subscription is reconnecting, which acts on the notice it missed', async () => {
    const told: string[] = [];
    await listener((id) => told.push(id));
    const api = notices(NEVER_MS);
    // Heard once: known alive from then on.
    await api.tell('sub-a');
    // Its subscriber connection drops; it comes back after ioredis' first reconnect delay (100 ms),
    // long after this DELETE's PUBLISH, which reaches no one.
    await killSubscribers('webhook-deletions-dispatcher-subscriber');
    await api.tell('sub-b');
    expect(told).to.deep.equal(['sub-a', 'sub-b']);
    // Acted on once, though read both from the recent notices and, for sub-a, heard live before.
    await api.tell('sub-c');
    expect(told).to.deep.equal(['sub-a', 'sub-b', 'sub-c']);
  });

  it('waits for a dispatcher it never heard that is present in Redis, whose subscription is reconnecting (a fresh API server)', async () => {
    const told: string[] = [];
    const dispatcher = await listener((id) => told.push(id));
    expect(dispatcher.reachable(), 'its presence written before listen resolved').to.equal(null);
    await killSubscribers('webhook-deletions-dispatcher-subscriber');
    // Subscribed long before the dispatcher's first reconnect (100 ms): its PUBLISH reaches no one,
    // and it has heard no heartbeat yet (one a second).
    const api = notices(NEVER_MS);
    await api.tell('sub-a');
    expect(told).to.deep.equal(['sub-a']);
  });

  it('does not wait for a dispatcher that said it stopped', async () => {
    const told: string[] = [];
    const dispatcher = await listener((id) => told.push(id));
    const api = notices(NEVER_MS);
    await api.tell('sub-a');
    dispatcher.close();
    await new Promise((resolve) => setTimeout(resolve, 200));
    await api.tell('sub-b');
    expect(told).to.deep.equal(['sub-a']);
  });

  it('waits out its bound for a dispatcher heard alive that no longer answers (killed without a word)', async () => {
    const api = notices(400);
    await api.tell('warm-up');
    const ghost = createRedisClient(url, 'command');
    try {
      await redisReady(ghost);
      await ghost.publish(`${channelPrefix}webhook-dispatchers`, 'ghost');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const started = performance.now();
      await api.tell('sub-a');
      expect(performance.now() - started, 'waited for the one heard alive').to.be.at.least(350);
    } finally {
      ghost.disconnect();
    }
  });

  /**
   * A dispatcher and an API server on a private Redis the test may stop and start, the dispatcher
   * heard once (a first DELETE told it); what it was told is in `told`.
   */
  const onPrivateRedis = async (
    api: { waitMs: number; aliveMs?: number },
    body: (redis: PrivateRedis, notices: DeletionNotices, told: string[], dispatcher: DeletionListener) => Promise<void>,
    listenerOptions: { reachableWaitMs?: number } = {},
  ) => {
    const redis = await startPrivateRedis();
    try {
      const told: string[] = [];
      const onPrivate = { url: redis.url, channelPrefix };
      const dispatcher = createRedisDeletionListener({ ...onPrivate, ...listenerOptions });
      const notices = createRedisDeletionNotices({ ...onPrivate, ...api });
      opened.push(dispatcher, notices);
      await dispatcher.listen((id) => told.push(id));
      await notices.tell('before');
      expect(told).to.deep.equal(['before']);
      await body(redis, notices, told, dispatcher);
    } finally {
      await redis.stop();
    }
  };

  (redisServerInstalled() ? it : it.skip)('still waits for a dispatcher it heard before an outage longer than it counts one alive, right after Redis is back', async function () {
    this.timeout(30_000);
    // Counted alive 200 ms after it was heard: the outage below is five times that.
    await onPrivateRedis({ waitMs: 1_500, aliveMs: 200 }, async (redis, api, told) => {
      await redis.stop();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await redis.start();
      // The dispatcher may be taking work again already (its commands reconnected first) while the
      // API server has not heard it since the outage: the DELETE must not answer at once.
      const started = performance.now();
      await api.tell('after');
      const waited = performance.now() - started;
      expect(told.includes('after') || waited >= 1_400, `answered after ${Math.round(waited)} ms, the dispatcher told: ${told.includes('after')}`).to.equal(true);
    });
  });

  (redisServerInstalled() ? it : it.skip)('waits out its bound while Redis is away after start, and waits for the dispatchers again once it is back', async function () {
    this.timeout(30_000);
    await onPrivateRedis({ waitMs: 1_000 }, async (redis, api, told) => {
      await redis.stop();
      // PUBLISH fails at once: a dispatcher known alive gets the bound to meet the deletion in the log.
      const started = performance.now();
      await api.tell('during');
      expect(performance.now() - started, 'waited out the bound').to.be.at.least(950);
      await redis.start();
      // Both sides subscribe again after their reconnect, each in its own time.
      for (let i = 0; !told.includes('after') && i < 100; i++) {
        await api.tell('after');
        if (!told.includes('after')) await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(told).to.not.include('during');
      expect(told.filter((id) => id === 'after')).to.have.length(1);
    });
  });

  /** Resolves once the dispatcher no longer counts on its presence in Redis (gone with the Redis it was connected to, or aged). */
  const unreachable = async (dispatcher: DeletionListener, withinMs = 2_000): Promise<{ readonly waiting: Promise<void> }> => {
    for (let i = 0; i < withinMs / 10; i++) {
      const waiting = dispatcher.reachable();
      if (waiting !== null) return { waiting };
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`still reachable after ${withinMs} ms`);
  };

  (redisServerInstalled() ? it : it.skip)('holds attempts while its presence is not in the Redis it can be told through, until written there again', async function () {
    this.timeout(30_000);
    await onPrivateRedis(
      { waitMs: 1_000 },
      async (redis, _api, _told, dispatcher) => {
        expect(dispatcher.reachable()).to.equal(null);
        await redis.stop();
        const { waiting } = await unreachable(dispatcher);
        let released = false;
        void waiting.then(() => (released = true));
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(released, 'released while Redis was away').to.equal(false);
        await redis.start();
        await waiting;
        expect(dispatcher.reachable()).to.equal(null);
        // Written in the new, empty Redis, where an API server that never heard it reads it.
        const admin = createRedisClient(redis.url, 'command');
        try {
          await redisReady(admin);
          expect(await admin.zcard(`${channelPrefix}webhook-dispatchers-present`)).to.equal(1);
        } finally {
          admin.disconnect();
        }
      },
      { reachableWaitMs: NEVER_MS },
    );
  });

  (redisServerInstalled() ? it : it.skip)('lets attempts go on after its bound while Redis stays away, and holds the next ones again', async function () {
    this.timeout(30_000);
    await onPrivateRedis(
      { waitMs: 1_000 },
      async (redis, _api, _told, dispatcher) => {
        await redis.stop();
        const { waiting } = await unreachable(dispatcher);
        const started = performance.now();
        await waiting;
        expect(performance.now() - started).to.be.within(200, 1_000);
        expect(dispatcher.reachable()).to.not.equal(null);
      },
      { reachableWaitMs: 300 },
    );
  });

  (redisServerInstalled() ? it : it.skip)('holds attempts once its presence has aged while Redis answers nothing (paused), until written again', async function () {
    this.timeout(30_000);
    await onPrivateRedis(
      { waitMs: 1_000 },
      async (redis, _api, _told, dispatcher) => {
        expect(dispatcher.reachable()).to.equal(null);
        redis.pause();
        let waiting: Promise<void>;
        const paused = performance.now();
        try {
          // The connection stays open; its last write ages past what a DELETE reads within 5 s.
          ({ waiting } = await unreachable(dispatcher, 8_000));
          expect(performance.now() - paused, 'counted on for a while, as it is in the set').to.be.at.least(2_500);
        } finally {
          redis.resume();
        }
        await waiting;
        expect(dispatcher.reachable()).to.equal(null);
      },
      { reachableWaitMs: NEVER_MS },
    );
  });
});
