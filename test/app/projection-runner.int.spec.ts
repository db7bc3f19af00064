import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import fc from 'fast-check';
import { createProjectionTail, createProjectionRunner, ProjectionReset } from '../../src/app/projection-runner.js';
import type { EventLog, NewEvent, RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'projection-runner-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const event = (type: string, n: number): NewEvent => ({ id: randomBytes(16).toString('hex'), type, workspaceId: 'ws', data: { n } });

const appendMany = async (log: EventLog, count: number, type = 'a') => {
  let last = 0;
  for (let i = 0; i < count; i++) last = (await log.append(`s-${i % 5}`, [event(type, i)], 'any')).records.at(-1)?.position ?? last;
  return last;
};

/** The log with some of its methods replaced, as a faulty or differently behaving adapter would have them. */
const overriding = (of: EventLog, overrides: Partial<EventLog>): EventLog =>
  new Proxy(of, { get: (target, key) => (key in overrides ? (overrides as Record<string | symbol, unknown>)[key] : Reflect.get(target, key)) });

/** A projection that records the positions it was given. */
const recorder = (name: string, types: readonly string[], checkpoint = 0) => {
  const seen: number[] = [];
  return { seen, spec: { name, types, checkpoint: () => checkpoint, apply: (e: RecordedEvent) => void seen.push(e.position) } };
};

describe('projection runners on one log tail (int)', () => {
  let log: ReturnType<typeof openSqliteLog>;
  beforeEach(() => {
    log = openSqliteLog({ file: join(dir, `${randomBytes(6).toString('hex')}.db`), pageSize: 7 });
  });
  afterEach(() => log.close());

  it('gives each runner its types in log order, exactly once, whether it starts before, during or after writes', async () => {
    const tail = createProjectionTail(log);
    const early = recorder('early', ['a']);
    const late = recorder('late', ['a', 'b']);
    const resumed = recorder('resumed', ['b'], 30);
    const first = tail.runner(early.spec);
    await first.start();
    await appendMany(log, 20);
    const writing = appendMany(log, 40, 'b');
    const second = tail.runner(late.spec);
    const third = tail.runner(resumed.spec);
    await Promise.all([second.start(), third.start()]);
    const head = await writing;
    await Promise.all([first, second, third].map((r) => r.waitFor(head)));

    const all = await log.readAll({ after: 0 });
    const of = (types: string[], after = 0) => all.filter((e) => types.includes(e.type) && e.position > after).map((e) => e.position);
    expect(early.seen).to.deep.equal(of(['a']));
    expect(late.seen).to.deep.equal(of(['a', 'b']));
    expect(resumed.seen).to.deep.equal(of(['b'], 30));
    expect([first, second, third].map((r) => r.position())).to.deep.equal([head, head, head]);
    await Promise.all([first, second, third].map((r) => r.stop()));
  });

  it('waitFor resolves at events of other types, and a failing projection stops alone', async () => {
    const healthy = recorder('healthy', ['a']);
    const runner = createProjectionRunner(log, healthy.spec);
    const failing = createProjectionRunner(log, {
      name: 'failing',
      types: ['a'],
      checkpoint: () => 0,
      apply: () => {
        throw new Error('broken projection');
      },
    });
    const errors: unknown[] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void errors.push(args);
    try {
      await Promise.all([runner.start(), failing.start()]);
      await appendMany(log, 3);
      const head = await appendMany(log, 2, 'other');
      await runner.waitFor(head);
      expect(healthy.seen).to.have.length(3);
      expect(failing.position()).to.equal(0);
      expect(errors).to.have.length(1);
    } finally {
      console.error = consoleError;
      await Promise.all([runner.stop(), failing.stop()]);
    }
  });

  it('resumes a projection from its checkpoint after a ProjectionReset, retrying a checkpoint it cannot read', async () => {
    // A store that loses everything at the 5th event and is unreachable for two checkpoint reads.
    let docs: number[] = [];
    let lost = false;
    let unreachable = 0;
    const warnings: unknown[] = [];
    const consoleWarn = console.warn;
    console.warn = (...args: unknown[]) => void warnings.push(args);
    const runner = createProjectionRunner(log, {
      name: 'resetting',
      types: ['a'],
      checkpoint: () => {
        if (unreachable-- > 0) throw new ProjectionReset('unreachable');
        return docs.at(-1) ?? 0;
      },
      apply: async (e) => {
        if (docs.length === 4 && !lost) {
          lost = true;
          docs = [];
          unreachable = 2;
          throw new ProjectionReset('data gone');
        }
        docs.push(e.position);
      },
    });
    try {
      await runner.start();
      const head = await appendMany(log, 12);
      await runner.waitFor(head);
      const all = (await log.readAll({ after: 0 })).map((e) => e.position);
      expect(docs).to.deep.equal(all);
      expect(runner.position()).to.equal(head);
      expect(warnings).to.have.length(1);
    } finally {
      console.warn = consoleWarn;
      await runner.stop();
    }
  });

  it('pipelines asynchronous applies, and moves progress only past applies that have settled', async () => {
    // A store that settles its applies in order, a batch at a time, a few milliseconds later.
    let queued: { position: number; resolve: () => void }[] = [];
    const settled: number[] = [];
    const timer = setInterval(() => {
      const batch = queued;
      queued = [];
      for (const q of batch) {
        settled.push(q.position);
        q.resolve();
      }
    }, 3);
    let mostInFlight = 0;
    const runner = createProjectionRunner(log, {
      name: 'pipelined',
      types: ['a'],
      checkpoint: () => 0,
      apply: (e) =>
        new Promise<void>((resolve) => {
          queued.push({ position: e.position, resolve });
          mostInFlight = Math.max(mostInFlight, queued.length);
        }),
    });
    try {
      await runner.start();
      // Types a and b interleaved: progress may pass a `b` only once the `a` before it has settled.
      const writes: Promise<number>[] = [];
      for (let i = 0; i < 60; i++) writes.push(appendMany(log, 1, i % 3 === 0 ? 'b' : 'a'));
      const positions = await Promise.all(writes);
      const checks = positions.map(async (position) => {
        await runner.waitFor(position);
        const settledThen = settled.slice();
        const all = await log.readAll({ after: 0 });
        const due = all.filter((e) => e.type === 'a' && e.position <= position).map((e) => e.position);
        expect(settledThen.slice(0, due.length), `settled when waitFor(${position}) resolved`).to.deep.equal(due);
      });
      await Promise.all(checks);
      const head = Math.max(...positions);
      await runner.waitFor(head);
      expect(runner.position()).to.equal(head);
      expect(mostInFlight, 'applies were handed over before earlier ones settled').to.be.greaterThan(1);
    } finally {
      clearInterval(timer);
      await runner.stop();
    }
  });

  it('says it is catching up from start and from a resume until it has reached the log, and not once live', async () => {
    const head = await appendMany(log, 30);
    let open = (): void => undefined;
    let gate = new Promise<void>((resolve) => (open = resolve));
    const runner = createProjectionRunner(log, { name: 'gated', types: ['a'], checkpoint: () => 0, apply: () => gate });
    const live = async () => {
      for (let i = 0; i < 200 && runner.catchingUp(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
      return !runner.catchingUp();
    };
    const consoleWarn = console.warn;
    console.warn = () => undefined;
    try {
      await runner.start();
      expect(runner.catchingUp(), 'started, applies held').to.equal(true);
      open();
      await runner.waitFor(head);
      expect(await live()).to.equal(true);
      gate = new Promise<void>((resolve) => (open = resolve));
      runner.resume('a test');
      expect(runner.catchingUp(), 'resumed from its checkpoint, applies held').to.equal(true);
      open();
      expect(await live()).to.equal(true);
    } finally {
      console.warn = consoleWarn;
      await runner.stop();
    }
    expect(runner.catchingUp(), 'stopped').to.equal(false);
  });

  describe('a log whose tail was deleted', () => {
    /** Appends `count` events to a stream of their own at the end of the log and deletes it; answers the last deleted position. */
    const deleteTail = async (count: number) => {
      const stream = `doomed-${randomBytes(4).toString('hex')}`;
      const { records } = await log.append(stream, Array.from({ length: count }, (_, i) => event('a', i)), 'no_stream');
      await log.deleteStream(stream);
      return records.at(-1)?.position ?? 0;
    };

    /** The log as an adapter that counts deleted positions in its head would show it (SQLite's did). */
    const staleHead = (of: EventLog, head: number): EventLog => overriding(of, { headPosition: async () => head });

    it('starts, catches up and goes live when the head counts positions that were deleted', async () => {
      const kept = await appendMany(log, 20);
      const deletedTo = await deleteTail(30);
      const seen = recorder('after-delete', ['a']);
      const runner = createProjectionRunner(staleHead(log, deletedTo), seen.spec);
      await runner.start();
      await runner.waitFor(deletedTo);
      expect(seen.seen.at(-1)).to.equal(kept);
      expect(runner.catchingUp(), 'live').to.equal(false);
      const next = await appendMany(log, 1);
      await runner.waitFor(next);
      expect(seen.seen.at(-1)).to.equal(next);
      await runner.stop();
    });

    it('settles a waiter whose position was deleted before the live tail read it, once the rest is applied', async () => {
      const seen = recorder('live', ['a']);
      // The tail is held on the first event, so the deleted ones are gone before it reads on.
      let open = (): void => undefined;
      const gate = new Promise<void>((resolve) => (open = resolve));
      const held = overriding(log, { subscribe: (options, handler) => log.subscribe(options, async (e) => (await gate, handler(e))) });
      const runner = createProjectionRunner(held, seen.spec);
      await runner.start();
      const kept = await appendMany(log, 1);
      const deletedTo = await deleteTail(3);
      const waiting = runner.waitFor(deletedTo);
      open();
      await waiting;
      expect(seen.seen).to.deep.equal([kept]);
      await runner.stop();
    });

    it('a service restart over a deleted tail: every runner reaches the head the log reports', async () => {
      await appendMany(log, 50);
      await deleteTail(500);
      const runners = ['one', 'two'].map((name) => createProjectionRunner(log, recorder(name, ['a']).spec));
      await Promise.all(runners.map((r) => r.start()));
      const head = await log.headPosition();
      await Promise.all(runners.map((r) => r.waitFor(head)));
      expect(runners.map((r) => r.position())).to.deep.equal([head, head]);
      await Promise.all(runners.map((r) => r.stop()));
    });
  });

  it('yields to the event loop between the pages of a long catch-up', async () => {
    // Three catch-up pages (1,000 events each), read and applied without any I/O of their own.
    let head = 0;
    for (let i = 0; i < 10; i++) head = (await log.append(`bulk-${i}`, Array.from({ length: 250 }, (_, n) => event('a', n)), 'any')).records.at(-1)?.position ?? head;
    const runner = createProjectionRunner(log, recorder('long', ['a']).spec);
    let positionAtTimer = -1;
    setImmediate(() => (positionAtTimer = runner.position()));
    await runner.start();
    await runner.waitFor(head);
    await runner.stop();
    expect(positionAtTimer, 'a timer ran while the projection was catching up').to.be.within(0, head - 1);
  });

  it('gives up with a clear error, rejecting its waiters, when a log read does not move forwards', async () => {
    const head = await appendMany(log, 10);
    // An adapter that ignores `after` (a broken one) would have the catch-up read the same page forever.
    const stuck = overriding(log, { readAll: () => log.readAll({ after: 0, limit: 3 }) });
    const runner = createProjectionRunner(stuck, recorder('stuck', ['a']).spec);
    const consoleError = console.error;
    console.error = () => undefined;
    try {
      await runner.start();
      let failure: unknown;
      await runner.waitFor(head).catch((error: unknown) => (failure = error));
      expect((failure as Error).message).to.match(/projection stuck stopped: .*returned nothing beyond/);
      const later = await runner.waitFor(head + 1).then(() => 'resolved', () => 'rejected');
      expect(later, 'a waiter after the failure hears of it too').to.equal('rejected');
    } finally {
      console.error = consoleError;
      await runner.stop();
    }
  });

  describe('a tail reading only its runners\' types', () => {
    /** The log, noting the type of each event its subscriptions hand out; `reportsScanned` as given. */
    const watched = (reportsScanned: boolean) => {
      const handed: string[] = [];
      const watchedLog = overriding(log, {
        reportsScanned,
        subscribe: (options, handler) => log.subscribe(options, (e) => (handed.push(e.type), handler(e))),
      });
      return { handed, log: watchedLog };
    };

    for (const reportsScanned of [true, false]) {
      it(`${reportsScanned ? 'skips' : 'reads'} the other types of a log that ${reportsScanned ? 'tells' : 'does not tell'} the positions it looked through, and moves past them alike`, async () => {
        const { handed, log: seen } = watched(reportsScanned);
        const tail = createProjectionTail(seen);
        const mine = recorder('mine', ['a']);
        const runner = tail.runner(mine.spec);
        await runner.start();
        await appendMany(log, 5);
        const head = await appendMany(log, 50, 'b');
        await runner.waitFor(head);
        expect(runner.position()).to.equal(head);
        expect(mine.seen).to.have.length(5);
        expect(handed.filter((type) => type === 'b')).to.have.length(reportsScanned ? 0 : 50);
        await runner.stop();
      });
    }

    it('gives every runner its types exactly once, in order, whichever types later runners add while writes go on', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.array(fc.constantFrom('a', 'b', 'c', 'd'), { minLength: 20, maxLength: 80 }),
          fc.array(fc.record({ types: fc.subarray(['a', 'b', 'c', 'd'], { minLength: 1 }), at: fc.nat(80), checkpoint: fc.nat(40) }), { minLength: 1, maxLength: 4 }),
          async (writes, joiners) => {
            const file = openSqliteLog({ file: join(dir, `${randomBytes(6).toString('hex')}.db`), pageSize: 7 });
            const tail = createProjectionTail(file);
            const first = recorder('first', ['a']);
            const runners = [{ recorder: first, runner: tail.runner(first.spec), checkpoint: 0 }];
            try {
              await runners[0]!.runner.start();
              const starting: Promise<void>[] = [];
              let head = 0;
              for (let i = 0; i < writes.length; i++) {
                for (const [j, joiner] of joiners.entries()) {
                  if (joiner.at !== i) continue;
                  const joined = recorder(`joiner-${j}`, joiner.types, joiner.checkpoint);
                  const runner = tail.runner(joined.spec);
                  runners.push({ recorder: joined, runner, checkpoint: joiner.checkpoint });
                  // Not awaited: it joins while the writes go on.
                  starting.push(runner.start());
                }
                head = (await file.append(`s-${i % 3}`, [event(writes[i] as string, i)], 'any')).records[0]?.position ?? head;
              }
              for (const [j, joiner] of joiners.entries()) {
                if (joiner.at < writes.length) continue;
                const joined = recorder(`joiner-${j}`, joiner.types, joiner.checkpoint);
                const runner = tail.runner(joined.spec);
                runners.push({ recorder: joined, runner, checkpoint: joiner.checkpoint });
                starting.push(runner.start());
              }
              await Promise.all(starting);
              await Promise.all(runners.map(({ runner }) => runner.waitFor(head)));
              const all = await file.readAll({ after: 0 });
              for (const { recorder: r, checkpoint } of runners) {
                const types = new Set(r.spec.types);
                const due = all.filter((e) => types.has(e.type) && e.position > checkpoint).map((e) => e.position);
                expect(r.seen, r.spec.name).to.deep.equal(due);
              }
            } finally {
              await Promise.all(runners.map(({ runner }) => runner.stop()));
              await file.close();
            }
          },
        ),
        { numRuns: 40 },
      );
    });
  });
});
