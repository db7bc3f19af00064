// The pump's in-flight limits with the embedded schedule: attempts that never end hold only their own
// subscription's and workspace's slots, and nothing waiting is dropped. And its takes: no take after
// one that brought fewer than there was room for.
import { expect } from 'chai';
import { createPump, type Pump } from '../../src/webhooks/dispatch/pump.js';
import type { DueAttempt, RetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import { eventually } from '../support/webhooks-dispatch.js';

describe('webhook pump: in-flight limits', () => {
  const schedule = createMemoryRetrySchedule();
  const started: DueAttempt[] = [];
  const hanging: (() => void)[] = [];
  let pump: Pump;

  /** Workspace A's subscriptions a0..a7 and B's b0; A's attempts hang until released, B's end at once. */
  const start = (maxInFlightPerWorkspace: number) => {
    pump = createPump({
      schedule,
      clock: () => 1_000,
      maxInFlight: 8,
      maxInFlightPerSubscription: 16,
      maxInFlightPerWorkspace,
      workspaceOf: (subscriptionId) => subscriptionId.slice(0, 1),
      run: (entry) => {
        started.push(entry);
        return entry.subscriptionId.startsWith('a') ? new Promise<void>((resolve) => hanging.push(resolve)) : Promise.resolve();
      },
    });
    pump.start();
  };

  beforeEach(async () => {
    started.length = 0;
    // A's 16 deliveries are due before B's one: taken in due order, A alone could fill every slot.
    for (let i = 0; i < 16; i++) await schedule.put({ deliveryId: `a-${i}`, subscriptionId: `a${i % 8}`, dueAt: i, round: 1 });
    await schedule.put({ deliveryId: 'b-0', subscriptionId: 'b0', dueAt: 100, round: 1 });
  });

  afterEach(async () => {
    hanging.splice(0).forEach((resolve) => resolve());
    await pump.stop();
    while ((await schedule.takeDue(Number.MAX_SAFE_INTEGER, 1000, () => 1000)).length > 0);
  });

  const startedOf = (workspace: string) => started.filter((e) => e.subscriptionId.startsWith(workspace)).length;

  it('keeps a workspace to its share, so another workspace is served while the first one hangs', async () => {
    start(3);
    await eventually("B's attempt", () => started.some((e) => e.deliveryId === 'b-0'));
    expect(startedOf('a')).to.equal(3);
    // Each attempt of A that ends lets exactly one more of A's in, until all 16 have run: none is dropped.
    while (startedOf('a') < 16) {
      const before = startedOf('a');
      hanging.shift()?.();
      await eventually('the next attempt of A', () => startedOf('a') === before + 1);
      expect(hanging).to.have.length(3);
    }
    expect(new Set(started.map((e) => e.deliveryId)).size).to.equal(17);
  });

  it('without a workspace limit, the first workspace takes every slot (what the limit prevents)', async () => {
    start(1000);
    await eventually('every slot taken', () => hanging.length === 8);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(started.some((e) => e.deliveryId === 'b-0')).to.equal(false);
  });
});

describe('webhook pump: takes', () => {
  it('asks the schedule once when a take brings fewer than there is room for, and again when it fills the room', async () => {
    const schedule = createMemoryRetrySchedule();
    const takes: number[] = [];
    const counted: RetrySchedule = {
      ...schedule,
      takeDue: async (now, limit, room) => {
        const taken = await schedule.takeDue(now, limit, room);
        takes.push(taken.length);
        return taken;
      },
    };
    const started: string[] = [];
    const hanging: (() => void)[] = [];
    const pump = createPump({
      schedule: counted,
      clock: () => 1_000,
      maxInFlight: 8,
      maxInFlightPerSubscription: 8,
      maxInFlightPerWorkspace: 8,
      workspaceOf: () => 'w',
      run: (entry) => {
        started.push(entry.deliveryId);
        return new Promise<void>((resolve) => hanging.push(resolve));
      },
    });
    try {
      for (let i = 0; i < 3; i++) await schedule.put({ deliveryId: `a-${i}`, subscriptionId: 's', dueAt: i, round: 1 });
      pump.start();
      await eventually('three attempts', () => started.length === 3);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(takes, 'three of eight: nothing more was due').to.deep.equal([3]);
      // Five slots left and six due: the take that fills them is followed by another when a slot frees.
      for (let i = 0; i < 6; i++) await schedule.put({ deliveryId: `b-${i}`, subscriptionId: 's', dueAt: i, round: 1 });
      pump.kick();
      await eventually('eight attempts', () => started.length === 8);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(takes).to.deep.equal([3, 5]);
      hanging.shift()?.();
      await eventually('the ninth attempt', () => started.length === 9);
      expect(takes.slice(0, 3)).to.deep.equal([3, 5, 1]);
    } finally {
      hanging.splice(0).forEach((resolve) => resolve());
      await pump.stop();
    }
  });
});
