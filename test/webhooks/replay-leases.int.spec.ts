// Replay leases, in memory and in a real Redis (REDIS_URL): one holder at a time, renewed and released
// only by that holder, and taken over by another once a dead holder's lease runs out.
import { expect } from 'chai';
import { randomId } from '../../src/shared/ids.js';
import { createMemoryReplayLeases } from '../../src/webhooks/dispatch/replay-leases/memory.js';
import { createRedisReplayLeases } from '../../src/webhooks/dispatch/replay-leases/redis.js';
import { settle } from '../support/webhooks-dispatch.js';

const redisUrl = process.env['REDIS_URL'];

describe('replay leases (int)', () => {
  it('memory: one drive at a time in the process, free again once released', async () => {
    const leases = createMemoryReplayLeases();
    expect(await leases.acquire('r1')).to.equal(true);
    expect(await leases.acquire('r1')).to.equal(false);
    expect(await leases.renew('r1')).to.equal(true);
    expect(await leases.renew('r2')).to.equal(false);
    await leases.release('r1');
    expect(await leases.acquire('r1')).to.equal(true);
  });

  (redisUrl ? describe : describe.skip)('redis', () => {
    const prefix = `test:replay-lease:${randomId()}:`;
    const open = (ttlMs: number) => createRedisReplayLeases({ url: redisUrl as string, ttlMs, prefix });

    it('gives a replay to one of two dispatchers, and only its holder renews or releases it', async () => {
      const [a, b] = [open(10_000), open(10_000)];
      try {
        const results = await Promise.all([a.acquire('r1'), b.acquire('r1')]);
        expect(results.filter(Boolean)).to.have.length(1);
        const [holder, other] = results[0] ? [a, b] : [b, a];
        expect(await other.renew('r1')).to.equal(false);
        await other.release('r1');
        expect(await other.acquire('r1')).to.equal(false);
        expect(await holder.renew('r1')).to.equal(true);
        await holder.release('r1');
        expect(await other.acquire('r1')).to.equal(true);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it("lets another dispatcher take a replay once its holder stopped renewing, and the late holder's renewal then fails", async () => {
      const [dead, next] = [open(300), open(300)];
      try {
        expect(await dead.acquire('r2')).to.equal(true);
        expect(await next.acquire('r2')).to.equal(false);
        await settle(450);
        expect(await next.acquire('r2')).to.equal(true);
        expect(await dead.renew('r2')).to.equal(false);
      } finally {
        await Promise.all([dead.close(), next.close()]);
      }
    });
  });
});
