import { expect } from 'chai';
import { createMemoryRateLimiter } from '../../src/ratelimit/memory.js';
import { rateLimiterContract } from './rate-limiter.contract.js';

rateLimiterContract('in-process', async () => {
  const limiter = createMemoryRateLimiter({ windowMs: 300 });
  return { limiter, windowMs: 300, teardown: () => limiter.close() };
});

describe('in-process rate limiter', () => {
  it('opens the window at the first request and counts Retry-After from it', async () => {
    let now = 1_000_000;
    const limiter = createMemoryRateLimiter({ windowMs: 60_000, now: () => now });
    await limiter.hit('k', 1);
    now += 45_500;
    expect(await limiter.hit('k', 1)).to.deep.equal({ allowed: false, retryAfterSeconds: 15 });
    now += 14_500;
    expect((await limiter.hit('k', 1)).allowed).to.equal(true);
  });
});
