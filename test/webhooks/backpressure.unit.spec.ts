// Backpressure between the embedded delivery thread and the request thread (src/webhooks/dispatch/
// backpressure.ts): writes wait only while deliveries are late AND the delivery thread is busy (a slow
// receiver leaves attempts late with the thread idle); the signal runs out by itself when the delivery
// side stops renewing it, is released at once by clear(), a held request waits at most its bound, and one whose client left goes at once.
import { expect } from 'chai';
import fc from 'fast-check';
import { Worker } from 'node:worker_threads';
import {
  createBackpressureBuffer,
  eventLoopBusy,
  heldQueue,
  presses,
  readBackpressure,
  RELEASE_DECREASE,
  RELEASE_FLOOR,
  RELEASE_GROWTH,
  RELEASE_START,
  releasePace,
  sharedDeadline,
  signalBackpressure,
} from '../../src/webhooks/dispatch/backpressure.js';

const OPTIONS = { lateMs: 50, busyShare: 0.85, everyMs: 5 };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const eventuallyTrue = async (probe: () => boolean): Promise<void> => {
  while (!probe()) await new Promise((resolve) => setImmediate(resolve));
};
const NOW_US = 1_800_000_000_000_000;

describe('webhook delivery backpressure (unit)', () => {
  it('presses exactly when the earliest waiting attempt is over lateMs late and the loop busier than busyShare', () => {
    fc.assert(
      fc.property(
        fc.option(fc.integer({ min: -10_000_000, max: 10_000_000 }), { nil: null }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 5_000 }),
        (lateUs, busy, lateMs) => {
          const dueAt = lateUs === null ? null : NOW_US - lateUs;
          const expected = lateUs !== null && lateUs > lateMs * 1000 && busy > 0.85;
          expect(presses(dueAt, NOW_US, busy, { lateMs, busyShare: 0.85 })).to.equal(expected);
        },
      ),
    );
    // The edges: late by exactly the bound, or busy by exactly the share, is not enough.
    expect(presses(NOW_US - 50_000, NOW_US, 0.99, OPTIONS)).to.equal(false);
    expect(presses(NOW_US - 50_001, NOW_US, 0.85, OPTIONS)).to.equal(false);
    expect(presses(NOW_US - 50_001, NOW_US, 0.851, OPTIONS)).to.equal(true);
  });

  it('asks for writes to wait while late and busy, and no longer once either ends', async () => {
    const shared = sharedDeadline(createBackpressureBuffer());
    const request = readBackpressure(shared);
    let state = { late: true, busy: 0.97 };
    const delivery = signalBackpressure(
      shared.press,
      { oldestDueAt: async () => (state.late ? NOW_US - 200_000 : null), busy: () => state.busy },
      () => NOW_US,
      OPTIONS,
    );
    try {
      await sleep(30);
      expect(request.pressing(), 'late and busy').to.equal(true);
      state = { late: true, busy: 0.1 };
      await sleep(30);
      expect(request.pressing(), 'late behind a slow receiver, the thread idle').to.equal(false);
      state = { late: false, busy: 1 };
      await sleep(30);
      expect(request.pressing(), 'busy and on time').to.equal(false);
      state = { late: true, busy: 1 };
      await sleep(30);
      expect(request.pressing()).to.equal(true);
    } finally {
      delivery.stop();
    }
    expect(request.pressing(), 'stopped').to.equal(false);
  });

  it('runs out by itself within three periods when the delivery side stops renewing it', async () => {
    let now = 1_000_000;
    const shared = sharedDeadline(createBackpressureBuffer(), () => now);
    const request = readBackpressure(shared, () => now);
    // The last press of a delivery side whose loop then stopped (stuck): nothing renews it.
    shared.press(3 * OPTIONS.everyMs);
    expect(request.pressing()).to.equal(true);
    now += 3 * OPTIONS.everyMs - 1;
    expect(request.pressing()).to.equal(true);
    now += 1;
    expect(request.pressing(), 'the deadline has passed').to.equal(false);
  });

  it('says it stopped once, when it stops, and does not ask the schedule while idle', async () => {
    const said: number[] = [];
    let asked = 0;
    let busy = 1;
    const delivery = signalBackpressure(
      (forMs) => said.push(forMs),
      {
        oldestDueAt: async () => {
          asked += 1;
          return NOW_US - 1_000_000;
        },
        busy: () => busy,
      },
      () => NOW_US,
      OPTIONS,
    );
    try {
      await sleep(30);
      expect(said.length).to.be.at.least(2);
      expect(new Set(said)).to.deep.equal(new Set([3 * OPTIONS.everyMs]));
      busy = 0.2;
      await sleep(10);
      const askedWhenIdle = asked;
      const saidWhenIdle = said.length;
      await sleep(40);
      expect(asked, 'the schedule is not asked while idle').to.equal(askedWhenIdle);
      expect(said.length, 'nothing more said while idle').to.equal(saidWhenIdle);
      expect(said.at(-1), 'the last word: stopped').to.equal(0);
      expect(said.filter((ms) => ms === 0)).to.have.length(1);
    } finally {
      delivery.stop();
    }
    expect(said.filter((ms) => ms === 0), 'stop() while not pressing says nothing more').to.have.length(1);
  });

  it('does not press when the backlog cannot be read', async () => {
    const shared = sharedDeadline(createBackpressureBuffer());
    const request = readBackpressure(shared);
    const delivery = signalBackpressure(shared.press, { oldestDueAt: () => Promise.reject(new Error('gone')), busy: () => 1 }, () => NOW_US, OPTIONS);
    try {
      await sleep(30);
      expect(request.pressing()).to.equal(false);
    } finally {
      delivery.stop();
    }
  });

  it('lets a held request go when pressure ends, at its bound at the latest, and all at once on clear()', async () => {
    const shared = sharedDeadline(createBackpressureBuffer());
    const request = readBackpressure(shared);
    const pressFor = shared.press;

    // Not pressing: at once.
    let done = false;
    await request.eased(10_000).then(() => (done = true));
    expect(done).to.equal(true);

    // Pressing for 60 ms, a bound of 10 s: goes when the pressure ends.
    pressFor(60);
    const started = Date.now();
    await request.eased(10_000);
    expect(Date.now() - started).to.be.within(40, 5_000);

    // Pressing for 10 s, a bound of 50 ms: goes at its bound.
    pressFor(10_000);
    const bounded = Date.now();
    await request.eased(50);
    expect(Date.now() - bounded).to.be.within(40, 5_000);

    // Many held with long bounds: clear() lets every one go.
    const held = [1, 2, 3].map(() => request.eased(60_000));
    let settled = 0;
    held.forEach((p) => void p.then(() => settled++));
    await sleep(20);
    expect(settled).to.equal(0);
    request.clear();
    await Promise.all(held);
    expect(request.pressing()).to.equal(false);
  });

  it('lets held requests go a few at a time, the longest held first, and a new one waits behind them', async () => {
    const shared = sharedDeadline(createBackpressureBuffer());
    const request = readBackpressure(shared);
    shared.press(60_000);
    const order: number[] = [];
    const held = Array.from({ length: 20 }, (_, i) => request.eased(60_000).then(() => order.push(i)));
    await sleep(20);
    expect(order, 'none while pressed').to.deep.equal([]);
    shared.press(0);
    expect(request.pressing(), 'earlier writes still wait').to.equal(true);
    const late = request.eased(60_000).then(() => order.push(20));
    // A look (5 ms) lets a few go: after the first one some but not all have gone.
    await eventuallyTrue(() => order.length > 0);
    expect(order.length).to.be.within(1, 8);
    await Promise.all([...held, late]);
    expect(order, 'in the order they came, the newcomer last').to.deep.equal(Array.from({ length: 21 }, (_, i) => i));
    expect(request.pressing()).to.equal(false);
  });

  it('lets writes held together through a long press go evenly over their bound, not all at it, each by its bound', async () => {
    let now = 1_000_000;
    const shared = sharedDeadline(createBackpressureBuffer(), () => now);
    const request = readBackpressure(shared, () => now);
    shared.press(60_000);
    // 64 writers answered by one commit come back together.
    const wentAt: number[] = [];
    const held = Array.from({ length: 64 }, () => request.eased(250).then(() => wentAt.push(now)));
    // The clock moves 5 ms at a time, and at least one look (5 ms, real) sees each instant.
    const byInstant: number[] = [];
    for (let t = 5; t <= 250; t += 5) {
      now = 1_000_000 + t;
      const before = wentAt.length;
      await sleep(12);
      byInstant.push(wentAt.length - before);
    }
    await Promise.all(held);
    expect(wentAt.every((at) => at <= 1_000_250), 'each by its bound').to.equal(true);
    expect(Math.max(...byInstant), 'at most a few in any 5 ms').to.be.at.most(3);
    expect(byInstant.slice(0, 10).reduce((a, b) => a + b), 'some in the first 50 ms').to.be.within(8, 16);

    // One held alone waits to its bound.
    let alone = false;
    const lone = request.eased(250).then(() => (alone = true));
    now += 200;
    await sleep(12);
    expect(alone, 'not before its bound').to.equal(false);
    now += 50;
    await lone;
  });

  it('holds none past its bound and lets them go in the order they came, whatever joins, leaves and looks (fast-check)', () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('join' as const), after: fc.integer({ min: 0, max: 10 }), maxMs: fc.integer({ min: 1, max: 60 }) }),
      fc.record({ kind: fc.constant('leave' as const), pick: fc.nat() }),
      // A look a while later, or just at the earliest bound held (where a late release shows).
      fc.record({ kind: fc.constant('look' as const), after: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.constant('at a bound' as const)), more: fc.integer({ min: 0, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 200 }), (steps) => {
        const queue = heldQueue<number>();
        // The model: what is held, in the order it came, with its bound.
        let held: { readonly id: number; readonly until: number }[] = [];
        let now = 0;
        let next = 0;
        for (const s of steps) {
          if (s.kind === 'join') {
            now += s.after;
            queue.join(next, now, s.maxMs);
            held.push({ id: next++, until: now + s.maxMs });
          } else if (s.kind === 'leave') {
            const gone = held[s.pick % Math.max(1, held.length)];
            if (gone === undefined) continue;
            queue.leave(gone.id);
            held = held.filter((h) => h !== gone);
          } else {
            if (s.after !== 'at a bound') now += s.after;
            else if (held.length > 0) now = Math.max(now, Math.min(...held.map((h) => h.until)));
            const taken = queue.take(now, s.more);
            expect(taken, 'the first ones held, in order').to.deep.equal(held.slice(0, taken.length).map((h) => h.id));
            held = held.slice(taken.length);
            expect(held.filter((h) => h.until <= now), 'none past its bound').to.deep.equal([]);
          }
          expect(queue.size).to.equal(held.length);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('lets more go at each look while nothing presses, so that writes faster than the release keep no queue', async () => {
    let now = 1_000_000;
    const shared = sharedDeadline(createBackpressureBuffer(), () => now);
    const request = readBackpressure(shared, () => now);
    shared.press(50);
    let released = 0;
    const held = Array.from({ length: 200 }, () => request.eased(60_000).then(() => released++));
    now += 50;
    const seen: number[] = [];
    while (released < 200) {
      const before = released;
      await new Promise((resolve) => setImmediate(resolve));
      if (released > before) seen.push(released - before);
    }
    await Promise.all(held);
    expect(seen[0], 'the first look').to.equal(RELEASE_START);
    // What the pace lets go, look by look, with no press: the same arithmetic as releasePace's.
    const pace = releasePace();
    const expected: number[] = [];
    for (let left = 200; left > 0; ) {
      const going = pace(false, left);
      left -= going;
      if (going > 0) expected.push(going);
    }
    expect(seen, 'each look lets the pace go').to.deep.equal(expected);
    expect(seen.at(-2), 'more at the end than at the start').to.be.greaterThan(RELEASE_START);
    expect(request.pressing()).to.equal(false);
    let passed = false;
    await request.eased(60_000).then(() => (passed = true));
    expect(passed, 'a new write passes once none waits').to.equal(true);
  });

  describe('the pace of the release', () => {
    /** What `pace` lets go over `looks` looks with `waiting` held and nothing pressing. */
    const unpressed = (pace: ReturnType<typeof releasePace>, looks: number, waiting = 1_000_000) => Array.from({ length: looks }, () => pace(false, waiting));

    it('starts at RELEASE_START a look and grows by RELEASE_GROWTH a look, fractions carried to the next', () => {
      const gone = unpressed(releasePace(), 100);
      expect(gone[0]).to.equal(RELEASE_START);
      // After n looks, the sum of the paces so far, whole writes only.
      let sum = 0;
      gone.forEach((_, n) => {
        sum += RELEASE_START + n * RELEASE_GROWTH;
        const total = gone.slice(0, n + 1).reduce((a, b) => a + b, 0);
        expect(total, `after look ${n + 1}`).to.be.within(Math.floor(sum + 1e-9) - 1, Math.floor(sum + 1e-9));
      });
    });

    it('lowers the pace once when a press begins, however long it lasts, lets none go while it does, and grows again after it', () => {
      const pace = releasePace();
      unpressed(pace, 100);
      const before = RELEASE_START + 100 * RELEASE_GROWTH;
      for (let i = 0; i < 10; i++) expect(pace(true, 1000), 'while pressed').to.equal(0);
      const after = unpressed(pace, 40);
      expect(after[0], 'RELEASE_DECREASE of the pace before the press, not RELEASE_START again').to.equal(Math.floor(before * RELEASE_DECREASE));
      // 40 looks from the lowered pace, growing as before.
      const expected = 40 * before * RELEASE_DECREASE + ((40 * 39) / 2) * RELEASE_GROWTH;
      expect(after.reduce((a, b) => a + b, 0)).to.be.within(Math.floor(expected) - 1, Math.ceil(expected));
    });

    it('never goes below RELEASE_FLOOR a look, however many presses', () => {
      const pace = releasePace();
      // Each press lowers the pace, and no look in between grows it (none waits).
      for (let i = 0; i < 50; i++) {
        pace(true, 1000);
        pace(false, 0);
      }
      pace(true, 1000);
      // At the floor: a write within 1 / RELEASE_FLOOR looks, and few.
      const gone = unpressed(pace, Math.ceil(1 / RELEASE_FLOOR));
      expect(gone.reduce((a, b) => a + b, 0)).to.be.within(1, 2);
    });

    it('does not grow while each look empties the queue, nor bank what it did not use', () => {
      const pace = releasePace();
      expect(unpressed(pace, 200, 1), 'one waiting at each look').to.deep.equal(Array.from({ length: 200 }, () => 1));
      // The pace is still RELEASE_START: a queue now goes at RELEASE_START, not at 200 looks of growth or credit.
      expect(pace(false, 1000)).to.equal(RELEASE_START);
    });

    it('lets go no more than wait, and nothing when none waits', () => {
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.boolean(), fc.nat(100)), { maxLength: 300 }), (looks) => {
          const pace = releasePace();
          return looks.every(([pressed, waiting]) => {
            const going = pace(pressed, waiting);
            return Number.isInteger(going) && going >= 0 && going <= waiting && (!pressed || going === 0);
          });
        }),
      );
    });
  });

  it('lets a held request whose client left go at once, its place in the release to the next', async () => {
    let now = 1_000_000;
    const shared = sharedDeadline(createBackpressureBuffer(), () => now);
    // Two a look once the press ends, whatever the pace has learnt.
    const request = readBackpressure(shared, () => now, (pressed, waiting) => (pressed ? 0 : Math.min(2, waiting)));
    shared.press(50);
    const gone = new AbortController();
    let left = false;
    const leaving = request.eased(60_000, gone.signal).then(() => (left = true));
    let released = 0;
    const held = Array.from({ length: 3 }, () => request.eased(60_000).then(() => released++));
    await sleep(20);
    gone.abort();
    await leaving;
    expect(left).to.equal(true);
    expect(released, 'the others still held').to.equal(0);
    expect(request.pressing()).to.equal(true);
    now += 50;
    // The first look lets two go, both still waiting: none of its places spent on the one that left.
    await eventuallyTrue(() => released > 0);
    expect(released).to.equal(2);
    await Promise.all(held);
    let passed = false;
    await request.eased(60_000, AbortSignal.abort()).then(() => (passed = true));
    expect(passed, 'a client already gone is not held').to.equal(true);
  });

  it('is seen across threads: a worker that writes the buffer holds the reader here', async () => {
    const buffer = createBackpressureBuffer();
    const request = readBackpressure(sharedDeadline(buffer));
    const worker = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       const deadline = new BigInt64Array(workerData);
       Atomics.store(deadline, 0, BigInt(Date.now() + 60000));
       parentPort.postMessage('set');`,
      { eval: true, workerData: buffer },
    );
    await new Promise((resolve) => worker.once('message', resolve));
    expect(request.pressing()).to.equal(true);
    await worker.terminate();
    request.clear();
    expect(request.pressing()).to.equal(false);
  });

  it("measures the calling thread's event loop: busy while it computes, idle while it waits", async () => {
    const busy = eventLoopBusy();
    await sleep(50);
    busy();
    const from = Date.now();
    while (Date.now() - from < 60) {
      // Works without yielding.
    }
    expect(busy()).to.be.greaterThan(0.8);
    // Long enough that what else this process runs meanwhile (other suites' timers) stays a small share.
    await sleep(250);
    expect(busy()).to.be.lessThan(0.5);
  });
});
