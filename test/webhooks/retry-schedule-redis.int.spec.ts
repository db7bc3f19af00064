import { expect } from 'chai';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import { retryScheduleContract } from './retry-schedule.contract.js';

const redisUrl = process.env['REDIS_URL'];
const LEASE_MS = 60_000;
const LEASE_US = LEASE_MS * 1000;

/** Two dispatchers' views of one fresh schedule. */
const redisPair = async (url: string) => {
  const keyPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  const schedule = createRedisRetrySchedule({ url, leaseMs: LEASE_MS, keyPrefix });
  const other = createRedisRetrySchedule({ url, leaseMs: LEASE_MS, keyPrefix });
  await Promise.all([schedule.ready(), other.ready()]);
  return { schedule, other, teardown: () => Promise.all([schedule.close(), other.close()]).then(() => undefined) };
};

// The reference adapter runs the same contract, so the contract is known to describe the port.
retryScheduleContract('memory', async () => {
  const schedule = createMemoryRetrySchedule();
  return { schedule, other: schedule, teardown: async () => undefined };
});
retryScheduleContract('redis', redisUrl ? () => redisPair(redisUrl) : null, { propertyRuns: 25 });

(redisUrl ? describe : describe.skip)('redis RetrySchedule leases', () => {
  let pair: Awaited<ReturnType<typeof redisPair>>;
  const unlimited = () => Number.POSITIVE_INFINITY;
  beforeEach(async () => {
    pair = await redisPair(redisUrl as string);
    await pair.schedule.put({ deliveryId: 'd', subscriptionId: 's', dueAt: 100 });
  });
  afterEach(() => pair.teardown());

  it('offers an unsettled claim again once its lease has run out (its dispatcher died)', async () => {
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(1);
    expect(await pair.schedule.nextDueAt()).to.equal(200 + LEASE_US);
    expect(await pair.other.takeDue(200 + LEASE_US - 1, 10, unlimited)).to.deep.equal([]);
    expect(await pair.other.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 100 }]);
    expect(await pair.schedule.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([]);
  });

  it('settles a claim by put (the next attempt) or by remove (done)', async () => {
    await pair.schedule.put({ deliveryId: 'e', subscriptionId: 's', dueAt: 100 });
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(2);
    await pair.schedule.put({ deliveryId: 'd', subscriptionId: 's', dueAt: 300 });
    await pair.schedule.remove('e');
    expect(await pair.schedule.nextDueAt()).to.equal(300);
    const later = 200 + 2 * LEASE_US;
    expect(await pair.other.takeDue(later, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 300 }]);
    await pair.other.remove('d');
    expect(await pair.other.takeDue(later + 2 * LEASE_US, 10, unlimited)).to.deep.equal([]);
    expect(await pair.schedule.nextDueAt()).to.equal(null);
  });
});
