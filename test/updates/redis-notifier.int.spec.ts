import { expect } from 'chai';
import { createRedisNotifier } from '../../src/updates/redis.js';
import type { Notifier } from '../../src/updates/notifier.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { notifierContract } from './notifier.contract.js';

const redisUrl = process.env['REDIS_URL'];

// Two instances: the view of two processes (the one that appends, the one holding a long poll).
const pair = async (url: string) => {
  const channelPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  const [publisher, subscriber] = await Promise.all([createRedisNotifier({ url, channelPrefix }), createRedisNotifier({ url, channelPrefix })]);
  return { publisher, subscriber, teardown: () => Promise.all([publisher.close(), subscriber.close()]).then(() => undefined) };
};

notifierContract('redis', redisUrl ? () => pair(redisUrl) : null);

(redisServerInstalled() ? describe : describe.skip)('redis notifier when Redis restarts', () => {
  let redis: PrivateRedis;
  let notifiers: { publisher: Notifier; subscriber: Notifier; teardown(): Promise<void> };

  beforeEach(async () => {
    redis = await startPrivateRedis();
    notifiers = await pair(redis.url);
  });
  afterEach(async () => {
    await notifiers.teardown();
    await redis.stop();
  });

  it('fails a publish while Redis is down, and delivers again once it is back (re-subscribed)', async () => {
    const got: number[] = [];
    notifiers.subscriber.subscribe('w', (offset) => got.push(offset));
    await redis.stop();
    let failed = false;
    await notifiers.publisher.publish('w', 1).catch(() => (failed = true));
    expect(failed).to.equal(true);
    await redis.start();
    // The subscriber's reconnect may come after the publisher's: announce until one arrives.
    for (let offset = 2; got.length === 0 && offset < 200; offset++) {
      await notifiers.publisher.publish('w', offset).catch(() => undefined);
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(got).to.have.length.greaterThan(0);
    expect(got).to.not.include(1);
  });

  it('starts while Redis is down, and subscribes once Redis is there', async () => {
    await redis.stop();
    const channelPrefix = `test:${Math.random().toString(16).slice(2)}:`;
    const late = await createRedisNotifier({ url: redis.url, channelPrefix, connectWaitMs: 200 });
    await redis.start();
    const publisher = await createRedisNotifier({ url: redis.url, channelPrefix });
    try {
      const got: number[] = [];
      late.subscribe('w', (offset) => got.push(offset));
      for (let offset = 1; got.length === 0 && offset < 200; offset++) {
        await publisher.publish('w', offset);
        await new Promise((r) => setTimeout(r, 25));
      }
      expect(got).to.have.length.greaterThan(0);
    } finally {
      await Promise.all([late.close(), publisher.close()]);
    }
  });
});
