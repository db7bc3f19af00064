import { expect } from 'chai';
import { createRedisRateLimiter } from '../../src/ratelimit/redis.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { rateLimiterContract } from './rate-limiter.contract.js';

const WINDOW_MS = 300;
const redisUrl = process.env['REDIS_URL'];

rateLimiterContract(
  'redis',
  redisUrl
    ? async () => {
        const limiter = createRedisRateLimiter({ url: redisUrl, windowMs: WINDOW_MS, keyPrefix: 'test:' });
        await limiter.ready();
        return { limiter, windowMs: WINDOW_MS, teardown: () => limiter.close() };
      }
    : null,
);

/** Settles with the outcome, or 'pending' if the promise has not settled after `ms` (a hung call). */
const outcomeWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([
    promise.then(
      () => 'resolved',
      (error: Error) => `rejected: ${error.message}`,
    ),
    new Promise<string>((r) => setTimeout(() => r('pending'), ms)),
  ]);

const eventually = async (check: () => Promise<boolean>) => {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('never happened');
};

(redisServerInstalled() ? describe : describe.skip)('redis rate limiter when Redis goes away', () => {
  let redis: PrivateRedis;
  let limiter: ReturnType<typeof createRedisRateLimiter>;
  const works = () => limiter.hit('k', 1_000).then(() => true, () => false);

  beforeEach(async () => {
    redis = await startPrivateRedis();
    limiter = createRedisRateLimiter({ url: redis.url, windowMs: 60_000 });
    await limiter.ready();
  });
  afterEach(async () => {
    await limiter.close();
    await redis.stop();
  });

  // The auth middleware lets a request through when hit() throws: it must throw, not queue.
  it('rejects at once while Redis is down, and counts again once it is back', async () => {
    expect(await limiter.hit('k', 1_000)).to.include({ allowed: true });
    await redis.stop();
    expect(await outcomeWithin(limiter.hit('k', 1_000), 2_000)).to.match(/^rejected/);
    expect(await outcomeWithin(limiter.hit('k', 1_000), 2_000)).to.match(/^rejected/);
    await redis.start();
    await eventually(works);
    // A restarted Redis is empty: the window starts afresh.
    const decision = await limiter.hit('fresh', 1);
    expect(decision.allowed).to.equal(true);
    expect((await limiter.hit('fresh', 1)).allowed).to.equal(false);
  });

  it('rejects after the command timeout when Redis accepts but does not answer', async () => {
    redis.pause();
    try {
      expect(await outcomeWithin(limiter.hit('k', 1_000), 2_000)).to.equal('rejected: Command timed out');
    } finally {
      redis.resume();
    }
    await eventually(works);
  });
});
