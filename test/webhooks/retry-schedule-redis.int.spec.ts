import { expect } from 'chai';
import { Redis } from 'ioredis';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import { retryScheduleContract } from './retry-schedule.contract.js';
import { eventually } from '../support/webhooks-dispatch.js';

const redisUrl = process.env['REDIS_URL'];
const LEASE_MS = 60_000;
const LEASE_US = LEASE_MS * 1000;

/** Two dispatchers' views of one fresh schedule. */
const redisPair = async (url: string) => {
  const keyPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  const schedule = createRedisRetrySchedule({ url, leaseMs: LEASE_MS, keyPrefix });
  const other = createRedisRetrySchedule({ url, leaseMs: LEASE_MS, keyPrefix });
  await Promise.all([schedule.ready(), other.ready()]);
  /** What a Redis restarted without persistence leaves of this schedule: nothing. */
  const lose = async () => {
    const admin = new Redis(url);
    try {
      const keys = await admin.keys(`{${keyPrefix}retry}*`);
      if (keys.length > 0) await admin.del(...keys);
    } finally {
      admin.disconnect();
    }
  };
  return { schedule, other, keyPrefix, lose, teardown: () => Promise.all([schedule.close(), other.close()]).then(() => undefined) };
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
    await pair.schedule.put({ deliveryId: 'd', subscriptionId: 's', dueAt: 100, round: 1 });
  });
  afterEach(() => pair.teardown());

  it('offers an unsettled claim again once its lease has run out (its dispatcher died)', async () => {
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(1);
    expect(await pair.schedule.nextDueAt()).to.equal(200 + LEASE_US);
    expect(await pair.other.takeDue(200 + LEASE_US - 1, 10, unlimited)).to.deep.equal([]);
    expect(await pair.other.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 100, round: 1 }]);
    expect(await pair.schedule.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([]);
  });

  it('keeps a claimed entry claimed when another dispatcher offers it (a late retry request, a restart)', async () => {
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(1);
    await pair.other.offer({ deliveryId: 'd', subscriptionId: 's', dueAt: 150, round: 1 });
    expect(await pair.other.takeDue(300, 10, unlimited), 'the attempt under way is not offered again').to.deep.equal([]);
    expect(await pair.other.size()).to.equal(0);
    // The claim and its lease are untouched by the offer.
    expect(await pair.other.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 100, round: 1 }]);
  });

  it('takes an offer again once the claim was settled by remove (the taker then finds the delivery settled in the log)', async () => {
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(1);
    await pair.schedule.remove('d');
    await pair.other.offer({ deliveryId: 'd', subscriptionId: 's', dueAt: 150, round: 1 });
    expect(await pair.other.takeDue(300, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 150, round: 1 }]);
  });

  it('lets a manual retry (a later round) replace a claim whose outcome is recorded, and keeps it when that claim is removed', async () => {
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(1);
    // The claimer recorded "failed"; the retry request of round 2 is offered before its remove lands.
    await pair.other.offer({ deliveryId: 'd', subscriptionId: 's', dueAt: 250, round: 2 });
    await pair.schedule.remove('d', 1);
    expect(await pair.other.takeDue(300, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 250, round: 2 }]);
  });

  it('takes an entry stored before retries had their own lane as a first attempt, owned by nobody, and drops a retry the previous release removed from the wrong lane (an upgrade meets them)', async () => {
    await pair.schedule.remove('d');
    const admin = new Redis(redisUrl as string);
    try {
      const tag = `{${pair.keyPrefix}retry}`;
      // What the previous release wrote: "dueAt subscriptionId round owner", in the subscription's one lane.
      await admin.hset(`${tag}:entries`, 'old', '100 s 1 someowner');
      await admin.zadd(`${tag}:lane:s`, 100, 'old');
      await admin.zadd(`${tag}:lanes`, 100, 's');
      // A retry removed by a dispatcher of the previous release: its entry went, its id stayed in the retries' lane.
      await admin.zadd(`${tag}:retries:s`, 120, 'removed');
    } finally {
      admin.disconnect();
    }
    await pair.schedule.put({ deliveryId: 'new', subscriptionId: 's', dueAt: 150, round: 1, retry: true });
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.deep.equal([
      { deliveryId: 'new', subscriptionId: 's', dueAt: 150, round: 1, retry: true, ownPut: true },
      { deliveryId: 'old', subscriptionId: 's', dueAt: 100, round: 1 },
    ]);
    // Their leases run out: each goes back to its lane (the old entry to the first attempts'), and is taken again.
    expect(await pair.other.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([
      { deliveryId: 'new', subscriptionId: 's', dueAt: 150, round: 1, retry: true },
      { deliveryId: 'old', subscriptionId: 's', dueAt: 100, round: 1 },
    ]);
  });

  it('reads past the first page of due subscriptions (256 per round trip) to find ones with room', async () => {
    await pair.schedule.remove('d');
    for (let i = 0; i < 300; i++) await pair.schedule.put({ deliveryId: `p${i}`, subscriptionId: `sub${String(i).padStart(3, '0')}`, dueAt: i, round: 1 });
    // Only the last ten subscriptions (by due time) have room: every one of them is on the second page.
    const taken = await pair.schedule.takeDue(1_000, 10, (subscriptionId) => (Number(subscriptionId.slice(3)) >= 290 ? 1 : 0));
    expect(taken.map((e) => e.deliveryId).sort()).to.deep.equal(Array.from({ length: 10 }, (_, i) => `p${290 + i}`));
  });

  it('puts 1,000 entries given in one call, past the 256 a script takes, each marked as the putter\'s', async () => {
    await pair.schedule.remove('d');
    const entries = Array.from({ length: 1_000 }, (_, i) => ({ deliveryId: `f${i}`, subscriptionId: `sub${i}`, dueAt: i, round: 1 }));
    await pair.schedule.put(...entries);
    expect(await pair.schedule.size()).to.equal(1_000);
    const taken = await pair.schedule.takeDue(10_000, 2_000, unlimited);
    expect(taken.map((e) => e.deliveryId).sort()).to.deep.equal(entries.map((e) => e.deliveryId).sort());
    expect(taken.every((e) => e.ownPut === true)).to.equal(true);
  });

  it("marks a claim of the taker's own put, and no other", async () => {
    await pair.other.put({ deliveryId: 'e', subscriptionId: 's', dueAt: 100, round: 1 });
    await pair.other.offer({ deliveryId: 'f', subscriptionId: 's', dueAt: 100, round: 1 });
    const taken = await pair.schedule.takeDue(200, 10, unlimited);
    expect(new Map(taken.map((e) => [e.deliveryId, e.ownPut]))).to.deep.equal(new Map([['d', true], ['e', undefined], ['f', undefined]]));
  });

  it('drops the mark once another dispatcher may have attempted the delivery: its claim ran out, or a later round was offered', async () => {
    // The other claims the put and dies, maybe after recording an attempt: the putter's state is stale.
    expect(await pair.other.takeDue(200, 10, unlimited)).to.have.length(1);
    expect(await pair.schedule.takeDue(200 + LEASE_US, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 100, round: 1 }]);
    await pair.schedule.put({ deliveryId: 'e', subscriptionId: 's', dueAt: 100, round: 1 });
    await pair.other.offer({ deliveryId: 'e', subscriptionId: 's', dueAt: 100, round: 2 });
    expect(await pair.schedule.takeDue(300 + LEASE_US, 10, unlimited)).to.deep.equal([{ deliveryId: 'e', subscriptionId: 's', dueAt: 100, round: 2 }]);
  });

  it('settles a claim by put (the next attempt) or by remove (done)', async () => {
    await pair.schedule.put({ deliveryId: 'e', subscriptionId: 's', dueAt: 100, round: 1 });
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.have.length(2);
    await pair.schedule.put({ deliveryId: 'd', subscriptionId: 's', dueAt: 300, round: 1 });
    await pair.schedule.remove('e');
    expect(await pair.schedule.nextDueAt()).to.equal(300);
    const later = 200 + 2 * LEASE_US;
    expect(await pair.other.takeDue(later, 10, unlimited)).to.deep.equal([{ deliveryId: 'd', subscriptionId: 's', dueAt: 300, round: 1 }]);
    await pair.other.remove('d');
    expect(await pair.other.takeDue(later + 2 * LEASE_US, 10, unlimited)).to.deep.equal([]);
    expect(await pair.schedule.nextDueAt()).to.equal(null);
  });
});

(redisUrl ? describe : describe.skip)('redis RetrySchedule loss (Redis restarted without persistence)', () => {
  let pair: Awaited<ReturnType<typeof redisPair>>;
  const unlimited = () => Number.POSITIVE_INFINITY;
  const losses = { schedule: 0, other: 0 };
  /** Lets a re-seed started by a take finish. */
  const reseeded = () => new Promise((resolve) => setImmediate(resolve));
  beforeEach(async () => {
    pair = await redisPair(redisUrl as string);
    losses.schedule = 0;
    losses.other = 0;
    pair.schedule.onLost(async () => void losses.schedule++);
    pair.other.onLost(async () => void losses.other++);
    await pair.schedule.put({ deliveryId: 'd', subscriptionId: 's', dueAt: 100, round: 1 });
  });
  afterEach(() => pair.teardown());

  it('reports nothing while the entries it seeded are there', async () => {
    await pair.schedule.takeDue(50, 10, unlimited);
    await pair.other.takeDue(200, 10, unlimited);
    await pair.schedule.remove('d');
    await pair.schedule.takeDue(300, 10, unlimited);
    await reseeded();
    expect(losses).to.deep.equal({ schedule: 0, other: 0 });
  });

  it('has every dispatcher re-seed once after a loss, at its next take', async () => {
    await pair.lose();
    expect(await pair.schedule.takeDue(200, 10, unlimited)).to.deep.equal([]);
    await pair.other.takeDue(200, 10, unlimited);
    await reseeded();
    expect(losses).to.deep.equal({ schedule: 1, other: 1 });
    await pair.schedule.takeDue(300, 10, unlimited);
    await pair.other.takeDue(300, 10, unlimited);
    await reseeded();
    expect(losses, 'a loss is repaired once').to.deep.equal({ schedule: 1, other: 1 });
    await pair.lose();
    await pair.other.takeDue(400, 10, unlimited);
    await pair.schedule.takeDue(400, 10, unlimited);
    await reseeded();
    expect(losses, 'and the next loss again').to.deep.equal({ schedule: 2, other: 2 });
  });

  it('runs a re-seed that failed again at the next take', async () => {
    let failures = 1;
    pair.schedule.onLost(async () => {
      losses.schedule++;
      if (failures-- > 0) throw new Error('the log is away');
    });
    await pair.lose();
    for (let take = 0; take < 3; take++) {
      await pair.schedule.takeDue(200, 10, unlimited);
      await reseeded();
    }
    expect(losses.schedule).to.equal(2);
  });
});

(redisUrl ? describe : describe.skip)('redis RetrySchedule round trips', () => {
  let pair: Awaited<ReturnType<typeof redisPair>>;
  let monitor: Redis | undefined;
  /** This schedule's script calls, as Redis ran them (other specs share the server: told apart by the keys). */
  const scripts: string[][] = [];
  let markers = 0;
  /**
   * The scripts run since the last call: an offer marks the end, and MONITOR (another connection,
   * behind the commands it reports) has reported everything before it once it has reported the mark.
   */
  const scriptsSince = async (): Promise<string[][]> => {
    const marker = `marker-${++markers}`;
    await pair.other.offer({ deliveryId: marker, subscriptionId: 'markers', dueAt: Number.MAX_SAFE_INTEGER, round: 1 });
    const at = await eventually('the marker in the monitor', () => {
      const found = scripts.findIndex((args) => args.includes(marker));
      return found >= 0 ? found + 1 : undefined;
    });
    return scripts.splice(0, at).slice(0, -1);
  };
  beforeEach(async () => {
    pair = await redisPair(redisUrl as string);
    scripts.length = 0;
    monitor = await new Redis(redisUrl as string).monitor();
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (/^eval/i.test(args[0] ?? '') && args.some((arg) => arg.startsWith(`{${pair.keyPrefix}retry}`))) scripts.push(args);
    });
    await scriptsSince();
  });
  afterEach(async () => {
    monitor?.disconnect();
    await pair.teardown();
  });

  it('sends the removes of one turn in one script, which removes each of them', async () => {
    const entries = Array.from({ length: 300 }, (_, i) => ({ deliveryId: `d${i}`, subscriptionId: `s${i % 7}`, dueAt: 10 + i, round: 1 }));
    await pair.schedule.put(...entries);
    expect(await scriptsSince(), 'puts of 256 entries a script').to.have.length(2);
    await Promise.all(entries.slice(0, 250).map((entry) => pair.schedule.remove(entry.deliveryId, 1)));
    expect(await scriptsSince(), 'one script for 250 removes').to.have.length(1);
    expect(await pair.schedule.size()).to.equal(50 + markers);
    // Past a chunk's size they go in several scripts, and all of them apply.
    await Promise.all([...entries.slice(250), ...entries.slice(0, 250)].map((entry) => pair.schedule.remove(entry.deliveryId)));
    expect(await scriptsSince()).to.have.length(2);
    expect(await pair.schedule.size()).to.equal(markers);
  });
});
