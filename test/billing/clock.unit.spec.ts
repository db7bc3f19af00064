// The billing clock's scheduling, with a fake clock and a fake act: each due expiry is acted on once,
// at its time and in time order, a replaced or removed expiry never, a failed act again after the
// retry pause (not lost), and an earlier expiry wakes a clock that sleeps.
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { createBillingClock, type BillingClock } from '../../src/billing/clock.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

describe('billing clock (unit, fake clock)', () => {
  let now: number;
  let acted: string[];
  let failNext: number;
  let clock: BillingClock;
  const errors: unknown[] = [];

  const make = (maxSleepMs: number) =>
    createBillingClock({
      nowMs: () => now,
      maxSleepMs,
      retryMs: 100,
      onError: (error) => errors.push(error),
      async act(workspaceId, expiry) {
        if (failNext > 0) {
          failNext -= 1;
          throw new Error('append failed');
        }
        acted.push(`${workspaceId}@${expiry}`);
      },
    });

  /** Moves the fake clock and lets the clock loop look (it sleeps at most 5 ms). */
  const advanceTo = async (ms: number) => {
    now = ms;
    await sleep(30);
  };

  beforeEach(() => {
    now = T0;
    acted = [];
    failNext = 0;
    errors.length = 0;
    clock = make(5);
  });
  afterEach(() => clock.stop());

  it('acts on each expiry once, at its time, earliest first', async () => {
    clock.set('b', iso(T0 + 2000));
    clock.set('a', iso(T0 + 1000));
    clock.start();
    await advanceTo(T0 + 999);
    expect(acted).to.deep.equal([]);
    await advanceTo(T0 + 5000);
    expect(acted).to.deep.equal([`a@${iso(T0 + 1000)}`, `b@${iso(T0 + 2000)}`]);
    expect(clock.size()).to.equal(0);
    await advanceTo(T0 + 9000);
    expect(acted).to.have.length(2);
  });

  it('acts on what was already due when it starts (a plan that expired while the service was down)', async () => {
    clock.set('a', iso(T0 - 3_600_000));
    clock.start();
    await sleep(30);
    expect(acted).to.deep.equal([`a@${iso(T0 - 3_600_000)}`]);
  });

  it('a replaced expiry acts at the new time only; a removed one never', async () => {
    clock.set('a', iso(T0 + 1000));
    clock.set('a', iso(T0 + 3000));
    clock.set('b', iso(T0 + 1000));
    clock.set('b', null);
    clock.start();
    await advanceTo(T0 + 2000);
    expect(acted).to.deep.equal([]);
    await advanceTo(T0 + 3000);
    expect(acted).to.deep.equal([`a@${iso(T0 + 3000)}`]);
  });

  it('a failed act stays due and is tried again after the retry pause, doubling while it fails', async () => {
    failNext = 2;
    clock.set('a', iso(T0 + 1000));
    clock.start();
    await advanceTo(T0 + 1000);
    expect(errors).to.have.length(1);
    await advanceTo(T0 + 1099);
    expect(errors).to.have.length(1);
    await advanceTo(T0 + 1100);
    expect(errors).to.have.length(2);
    await advanceTo(T0 + 1299); // second pause: 200 ms
    expect(acted).to.deep.equal([]);
    await advanceTo(T0 + 1300);
    expect(acted).to.deep.equal([`a@${iso(T0 + 1000)}`]);
    expect(clock.size()).to.equal(0);
  });

  it('an earlier expiry wakes a clock sleeping towards a later one', async () => {
    const realClock = createBillingClock({ nowMs: () => Date.now(), maxSleepMs: 60_000, act: async (ws) => void acted.push(ws) });
    try {
      realClock.set('late', iso(Date.now() + 50_000));
      realClock.start();
      await sleep(20);
      realClock.set('soon', iso(Date.now() + 50));
      await sleep(200);
      expect(acted).to.deep.equal(['soon']);
    } finally {
      await realClock.stop();
    }
  });

  it('stop waits for the act in progress', async () => {
    let finished = false;
    const slow = createBillingClock({
      nowMs: () => now,
      maxSleepMs: 5,
      act: async () => {
        await sleep(50);
        finished = true;
      },
    });
    slow.set('a', iso(T0));
    slow.start();
    await sleep(10);
    await slow.stop();
    expect(finished).to.equal(true);
  });
});
