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
      takeDue: async (...args) => {
        const taken = await schedule.takeDue(...args);
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

describe('webhook pump: its timer', () => {
  it("arms it from what its take saw next due, without asking the schedule again", async () => {
    const schedule = createMemoryRetrySchedule();
    let asked = 0;
    const counted: RetrySchedule = {
      ...schedule,
      nextDueAt: async () => {
        asked += 1;
        return schedule.nextDueAt();
      },
    };
    const started: string[] = [];
    const clock = () => Date.now() * 1000;
    const pump = createPump({
      schedule: counted,
      clock,
      maxInFlight: 8,
      maxInFlightPerSubscription: 8,
      maxInFlightPerWorkspace: 8,
      workspaceOf: () => 'w',
      run: async (entry) => void started.push(entry.deliveryId),
    });
    try {
      await schedule.put({ deliveryId: 'now', subscriptionId: 's', dueAt: clock(), round: 1 }, { deliveryId: 'soon', subscriptionId: 's', dueAt: clock() + 50_000, round: 1 });
      pump.start();
      await eventually('the attempt due 50 ms later, started by the timer', () => started.includes('soon'));
      expect(started).to.deep.equal(['now', 'soon']);
      expect(asked, 'nextDueAt asked').to.equal(0);
    } finally {
      await pump.stop();
    }
  });
});

describe('webhook pump: puts', () => {
  /** A pump over `schedule` whose attempts hang until released; counts the schedule's takes, and the most in flight per workspace at once. */
  const pumpOver = (schedule: RetrySchedule, limits: { perSubscription: number; perWorkspace: number }) => {
    const takes: number[] = [];
    const hanging: (() => void)[] = [];
    const inFlight = new Map<string, number>();
    const most = new Map<string, number>();
    const started: DueAttempt[] = [];
    const workspaceOf = (subscriptionId: string) => subscriptionId.slice(0, 1);
    const pump = createPump({
      schedule: {
        ...schedule,
        takeDue: async (...args) => {
          const taken = await schedule.takeDue(...args);
          takes.push(taken.length);
          return taken;
        },
      },
      clock: () => 1_000,
      maxInFlight: 64,
      maxInFlightPerSubscription: limits.perSubscription,
      maxInFlightPerWorkspace: limits.perWorkspace,
      workspaceOf,
      run: (entry) => {
        started.push(entry);
        const ws = workspaceOf(entry.subscriptionId);
        inFlight.set(ws, (inFlight.get(ws) ?? 0) + 1);
        most.set(ws, Math.max(most.get(ws) ?? 0, inFlight.get(ws) as number));
        return new Promise<void>((resolve) =>
          hanging.push(() => {
            inFlight.set(ws, (inFlight.get(ws) as number) - 1);
            resolve();
          }),
        );
      },
    });
    return { pump, takes, hanging, most, started };
  };
  const entry = (deliveryId: string, subscriptionId: string, dueAt = 0): DueAttempt => ({ deliveryId, subscriptionId, dueAt, round: 1 });

  it('starts the attempts it puts that are due, without a take of their own; the rest waits for room, then a fill takes it', async () => {
    const { pump, takes, hanging, started } = pumpOver(createMemoryRetrySchedule(), { perSubscription: 2, perWorkspace: 64 });
    pump.start();
    try {
      await eventually('the first (empty) take', () => takes.length === 1);
      await pump.put([entry('a', 'a1'), entry('b', 'a1'), entry('c', 'a1'), entry('later', 'a2', 5_000)]);
      expect(started.map((e) => e.deliveryId)).to.deep.equal(['a', 'b']);
      expect(takes, 'no take for the put').to.deep.equal([0]);
      hanging.shift()?.();
      await eventually('c once a slot is free', () => started.length === 3);
      expect(started[2]?.deliveryId).to.equal('c');
      // What is not due yet is not started by its put.
      expect(started.some((e) => e.deliveryId === 'later')).to.equal(false);
    } finally {
      hanging.splice(0).forEach((resolve) => resolve());
      await pump.stop();
    }
  });

  it('never exceeds a workspace limit when a put takes while a fill is under way', async () => {
    const memory = createMemoryRetrySchedule();
    // A take that answers late, as a loaded Redis does: puts land while it is under way.
    let slowTakes = true;
    const slow: RetrySchedule = {
      ...memory,
      takeDue: async (...args) => {
        const taken = await memory.takeDue(...args);
        if (slowTakes) await new Promise((resolve) => setTimeout(resolve, 30));
        return taken;
      },
    };
    const { pump, hanging, most, started } = pumpOver(slow, { perSubscription: 16, perWorkspace: 4 });
    for (let i = 0; i < 4; i++) await memory.put(entry(`old-${i}`, `a${i}`));
    pump.start();
    try {
      // The fill's take has granted workspace a its 4 and not answered yet: the puts find no room.
      await new Promise((resolve) => setTimeout(resolve, 5));
      await Promise.all(Array.from({ length: 6 }, (_, i) => pump.put([entry(`new-${i}`, `a${i % 3}`)])));
      await eventually('the fill answered', () => started.length >= 4);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(most.get('a')).to.equal(4);
      slowTakes = false;
      // Each attempt that ends lets one more in: all ten run, never more than four at once.
      while (started.length < 10) {
        const before = started.length;
        hanging.shift()?.();
        await eventually('the next attempt', () => started.length === before + 1);
      }
      expect(most.get('a')).to.equal(4);
      expect(new Set(started.map((e) => e.deliveryId)).size).to.equal(10);
    } finally {
      hanging.splice(0).forEach((resolve) => resolve());
      await pump.stop();
    }
  });
});
