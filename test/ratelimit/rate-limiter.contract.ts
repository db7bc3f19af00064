// One contract for every RateLimiter adapter: fixed windows that open at a bucket's first request.
import { expect } from 'chai';
import type { RateLimiter } from '../../src/ratelimit/rate-limiter.js';

export interface RateLimiterFixture {
  readonly limiter: RateLimiter;
  /** The adapter's window in ms: short, so the suite can wait one out. */
  readonly windowMs: number;
  teardown(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const rateLimiterContract = (name: string, factory: (() => Promise<RateLimiterFixture>) | null) => {
  describe(`RateLimiter contract: ${name}`, () => {
    if (factory === null) {
      it('runs when its engine is configured');
      return;
    }
    let fixture: RateLimiterFixture;
    let prefix: string;
    beforeEach(async () => {
      fixture = await factory();
      prefix = `t${Math.random().toString(16).slice(2)}`;
    });
    afterEach(() => fixture.teardown());

    it('allows up to the limit in a window, then refuses with the seconds until it opens', async () => {
      const decisions = [];
      for (let i = 0; i < 4; i++) decisions.push(await fixture.limiter.hit(`${prefix}:a`, 3));
      expect(decisions.map((d) => d.allowed)).to.deep.equal([true, true, true, false]);
      const last = decisions[3];
      expect(last?.retryAfterSeconds).to.be.within(1, Math.ceil(fixture.windowMs / 1000));
    });

    it('keeps buckets apart', async () => {
      await fixture.limiter.hit(`${prefix}:a`, 1);
      expect((await fixture.limiter.hit(`${prefix}:a`, 1)).allowed).to.equal(false);
      expect((await fixture.limiter.hit(`${prefix}:b`, 1)).allowed).to.equal(true);
    });

    it('opens a new window after the window has passed', async () => {
      await fixture.limiter.hit(`${prefix}:a`, 1);
      expect((await fixture.limiter.hit(`${prefix}:a`, 1)).allowed).to.equal(false);
      await sleep(fixture.windowMs + 50);
      expect((await fixture.limiter.hit(`${prefix}:a`, 1)).allowed).to.equal(true);
    });

    it('counts concurrent hits exactly', async () => {
      const decisions = await Promise.all(Array.from({ length: 50 }, () => fixture.limiter.hit(`${prefix}:c`, 20)));
      expect(decisions.filter((d) => d.allowed)).to.have.length(20);
    });
  });
};
