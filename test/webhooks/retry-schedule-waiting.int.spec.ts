// The incremental read-back of waiting deliveries a shared retry schedule relies on (dispatch/waiting.ts),
// on the real SQLite log, shared by two writers as the dispatcher processes share it; and the same
// view started from a delivery-history index (real SQLite and memory adapters) instead of the stream's
// first record: always what a reading of the whole stream gives, whatever the index has applied.
import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Decided } from '../../src/domain/aggregate.js';
import { foldDeliveries, packSteps, type Delivery } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createWaitingDeliveries } from '../../src/webhooks/dispatch/waiting.js';
import { DELIVERY_INDEX_TYPES, type DeliveryIndex, type WaitingReader } from '../../projections/deliveries-index.js';
import { createMemoryDeliveryIndex } from '../../projections/deliveries-index-memory.js';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import { deliverySteps } from '../support/delivery-steps.js';

const scheduled = (id: string): Decided => ({
  type: 'delivery.scheduled',
  data: { delivery_id: id, subscription_id: 's', event_id: `e-${id}`, event_type: 'ticket.created', event_position: 1, fanned_out_through: 0, scheduled_at: 10 },
});
const attempted = (id: string, delivered: boolean): Decided => ({
  type: 'delivery.attempted',
  data: { delivery_id: id, round: 1, attempt: 1, delivered, status_code: delivered ? 200 : 500, error: null, latency_ms: 1, attempted_at: 20, next_attempt_at: delivered ? null : 30 },
});

describe('waiting deliveries read back incrementally (real SQLite log)', () => {
  let dir: string;
  let mine: SqliteEventLog;
  let other: SqliteEventLog;
  const append = (log: SqliteEventLog, steps: Decided[]) =>
    log.append(deliveryStream('s'), [{ id: `${Math.random()}`, type: 'delivery.recorded', workspaceId: 'w', data: packSteps(steps).data }], 'any');

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'waiting-'));
    mine = openSqliteLog({ file: join(dir, 'events.sqlite'), shared: true });
    other = openSqliteLog({ file: join(dir, 'events.sqlite'), shared: true });
  });
  afterEach(async () => {
    await Promise.all([mine.close(), other.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('is empty with no workspace for a stream that does not exist', async () => {
    const view = await createWaitingDeliveries(mine).read('s');
    expect([...view.deliveries.keys()]).to.deep.equal([]);
    expect(view.workspaceId).to.equal(null);
  });

  it('follows what any writer appends later, keeping only the deliveries still waiting', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a'), scheduled('b'), scheduled('c')]);
    expect([...(await waiting.read('s')).deliveries.keys()]).to.deep.equal(['a', 'b', 'c']);
    await append(other, [attempted('a', true), attempted('b', false)]);
    const view = await waiting.read('s');
    expect([...view.deliveries.keys()]).to.deep.equal(['b', 'c']);
    expect(view.deliveries.get('b')).to.include({ status: 'waiting', attempt: 1, nextAttemptAt: 30 });
    expect(view.workspaceId).to.equal('w');
  });

  it('gives concurrent readers a view that includes everything appended before they asked', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a')]);
    const first = waiting.read('s');
    await append(other, [scheduled('b')]);
    const [, second] = await Promise.all([first, waiting.read('s')]);
    expect([...second.deliveries.keys()]).to.deep.equal(['a', 'b']);
  });
});

/** A subscription's delivery steps appended to the log as a dispatcher records them. */
const deliveryRecords = (log: EventLog) => {
  const steps = deliverySteps(10);
  let count = 0;
  return {
    ...steps,
    schedule: (id: string) => steps.schedule('s', id),
    /** Packed as a dispatcher records them; a manual retry is an event of its own type. */
    async append(decided: readonly Decided[]): Promise<void> {
      if (decided.length === 0) return;
      const events = decided[0]?.type === 'delivery.retry_requested' ? decided : [packSteps(decided)];
      await log.append(deliveryStream('s'), events.map((event) => ({ id: `r${(count += 1)}`, type: event.type, workspaceId: 'w', data: event.data })), 'any');
    },
  };
};

/** The waiting deliveries a reading of the whole stream gives. */
const wholeStream = async (log: EventLog): Promise<Delivery[]> =>
  [...foldDeliveries(await log.readStream(deliveryStream('s'))).values()].filter((d) => d.status === 'waiting').sort((a, b) => (a.id < b.id ? -1 : 1));
const sorted = (deliveries: ReadonlyMap<string, Delivery>): Delivery[] => [...deliveries.values()].sort((a, b) => (a.id < b.id ? -1 : 1));

/** The log as it is, telling which revision each read of a delivery stream started from. */
const watched = (log: EventLog) => {
  const from: number[] = [];
  const reads: EventLog = Object.assign(Object.create(log) as EventLog, {
    readStream: (stream: string, fromRevision = 0) => {
      from.push(fromRevision);
      return log.readStream(stream, fromRevision);
    },
  });
  return { log: reads, from };
};

for (const adapter of ['sqlite', 'memory'] as const) {
  describe(`waiting deliveries started from the delivery-history index (${adapter} index, real SQLite log)`, () => {
    let dir: string;
    let log: SqliteEventLog;
    let index: DeliveryIndex;
    /** The index's place in the log. */
    let applied = 0;

    /** Applies the next `count` delivery records of the log to the index (all when omitted). */
    const applyNext = async (count = Infinity): Promise<void> => {
      for (const event of (await log.readAll({ after: applied, types: DELIVERY_INDEX_TYPES })).slice(0, count)) {
        await index.apply(event);
        applied = event.position;
      }
    };

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'waiting-seeded-'));
      log = openSqliteLog({ file: join(dir, 'events.sqlite'), durability: 'relaxed' });
      index = adapter === 'sqlite' ? openSqliteDeliveryIndex({ file: join(dir, 'history.sqlite') }) : createMemoryDeliveryIndex();
      applied = 0;
    });
    afterEach(async () => {
      await Promise.all([log.close(), index.close()]);
      rmSync(dir, { recursive: true, force: true });
    });

    it("starts a cold view from the index's waiting deliveries and reads only the records after them", async () => {
      const records = deliveryRecords(log);
      for (let i = 0; i < 40; i++) {
        const id = `d${String(i).padStart(2, '0')}`;
        await records.append(records.schedule(id));
        // Most are settled a record later, as a live subscription's are.
        if (i % 4 !== 0) await records.append(records.attempt(id, i % 4 === 1 ? 'delivered' : 'retry'));
      }
      await applyNext(50);
      const reads = watched(log);
      const view = await createWaitingDeliveries(reads.log, index).read('s');
      expect(reads.from).to.deep.equal([50]);
      expect(sorted(view.deliveries)).to.deep.equal(await wholeStream(log));
      expect(view.workspaceId).to.equal('w');
      expect(view.position).to.equal((await log.readStream(deliveryStream('s'))).at(-1)?.position);
    });

    it('starts a view left alone over again when the index is further ahead of it than what waits, and reads on otherwise', async () => {
      const records = deliveryRecords(log);
      const reads = watched(log);
      const waiting = createWaitingDeliveries(reads.log, index, 0);
      await records.append(records.schedule('first'));
      await waiting.read('s');
      // Twenty records past the view, the index has applied them all, and one delivery waits: started over.
      for (let i = 0; i < 10; i++) {
        await records.append(records.schedule(`d${i}`));
        await records.append(records.attempt(`d${i}`, 'delivered'));
      }
      await applyNext();
      reads.from.length = 0;
      expect(sorted((await waiting.read('s')).deliveries)).to.deep.equal(await wholeStream(log));
      expect(reads.from).to.deep.equal([21]);
      // Two records past it and five waiting: catching up reads less.
      await records.append([...records.schedule('w1'), ...records.schedule('w2'), ...records.schedule('w3')]);
      await records.append(records.schedule('w4'));
      await applyNext();
      reads.from.length = 0;
      expect(sorted((await waiting.read('s')).deliveries)).to.deep.equal(await wholeStream(log));
      expect(reads.from).to.deep.equal([21]);
      // Within the stale time nothing is asked of the index.
      const asked: string[] = [];
      const counted: WaitingReader = { waitingOf: (s) => (asked.push('waitingOf'), index.waitingOf(s)), appliedOf: (s) => (asked.push('appliedOf'), index.appliedOf(s)) };
      const fresh = createWaitingDeliveries(log, counted, 60_000);
      await fresh.read('s');
      await records.append(records.attempt('w1', 'delivered'));
      expect(sorted((await fresh.read('s')).deliveries)).to.deep.equal(await wholeStream(log));
      expect(asked).to.deep.equal(['waitingOf']);
    });

    it('keeps a delivery retried by hand after it settled, which a view read from the first record loses', async () => {
      const records = deliveryRecords(log);
      await records.append(records.schedule('a'));
      await records.append([...records.attempt('a', 'retry'), ...records.attempt('a', 'failed')]);
      expect(records.states.get('a')?.status).to.equal('failed');
      await records.append(records.retry('a'));
      await applyNext();
      const view = await createWaitingDeliveries(log, index).read('s');
      expect(sorted(view.deliveries)).to.deep.equal(await wholeStream(log));
      expect(view.deliveries.get('a')).to.include({ status: 'waiting', round: 2 });
      expect((await createWaitingDeliveries(log).read('s')).deliveries.has('a')).to.equal(false);
    });

    it('reads the stream from its first record, all the same, when the index cannot be reached', async () => {
      const records = deliveryRecords(log);
      await records.append([...records.schedule('a'), ...records.schedule('b')]);
      await records.append(records.attempt('a', 'delivered'));
      await applyNext();
      const unreachable: WaitingReader = { waitingOf: () => Promise.reject(new Error('ECONNREFUSED')), appliedOf: () => Promise.reject(new Error('ECONNREFUSED')) };
      const reads = watched(log);
      const warned: unknown[] = [];
      const warn = console.warn;
      console.warn = (...args: unknown[]) => void warned.push(args);
      try {
        const waiting = createWaitingDeliveries(reads.log, unreachable, 0);
        expect(sorted((await waiting.read('s')).deliveries)).to.deep.equal(await wholeStream(log));
        await records.append(records.schedule('c'));
        expect(sorted((await waiting.read('s')).deliveries)).to.deep.equal(await wholeStream(log));
      } finally {
        console.warn = warn;
      }
      expect(reads.from).to.deep.equal([0, 2]);
      expect(warned).to.have.length(1);
    });

    it('gives what a reading of the whole stream gives, whatever the index has applied when each read comes (property)', async () => {
      const step = fc.oneof(
        { arbitrary: fc.constant({ kind: 'schedule' as const }), weight: 3 },
        { arbitrary: fc.record({ kind: fc.constant('attempt' as const), pick: fc.nat(), delivered: fc.boolean() }), weight: 4 },
        { arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }), weight: 1 },
        { arbitrary: fc.record({ kind: fc.constant('retry' as const), pick: fc.nat() }), weight: 1 },
      );
      const round = fc.record({ steps: fc.array(fc.array(step, { minLength: 1, maxLength: 3 }), { maxLength: 6 }), indexed: fc.nat(8), stale: fc.boolean() });
      await fc.assert(
        fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 5 }), async (rounds) => {
          await log.deleteStream(deliveryStream('s'));
          await index.clear();
          applied = 0;
          const records = deliveryRecords(log);
          const waiting = createWaitingDeliveries(log, index, 0);
          const fresh = createWaitingDeliveries(log, index, Infinity);
          let scheduled = 0;
          const pick = <T>(items: readonly T[], n: number): T | undefined => items[n % Math.max(1, items.length)];
          for (const { steps, indexed, stale } of rounds) {
            for (const record of steps) {
              const decided: Decided[] = [];
              for (const s of record) {
                const all = [...records.states.values()];
                if (s.kind === 'schedule') decided.push(...records.schedule(`d${(scheduled += 1)}`));
                else if (s.kind === 'retry') {
                  // A retry is a record of its own.
                  const settled = pick(all.filter((d) => d.status === 'failed' || d.status === 'cancelled'), s.pick);
                  if (settled !== undefined) await records.append(records.retry(settled.id));
                } else {
                  const target = pick(all.filter((d) => d.status === 'waiting' && !decided.some((e) => e.data['delivery_id'] === d.id)), s.pick);
                  if (target !== undefined) decided.push(...(s.kind === 'cancel' ? records.cancel(target.id) : records.attempt(target.id, s.delivered ? 'delivered' : 'retry')));
                }
              }
              await records.append(decided);
            }
            await applyNext(indexed);
            const view = await (stale ? waiting : fresh).read('s');
            const expected = await wholeStream(log);
            // A view read from the first record loses a delivery retried by hand after it had settled: never one that is not waiting.
            expect(expected).to.include.deep.members(sorted(view.deliveries));
            for (const d of expected) if (d.round === 1) expect(view.deliveries.get(d.id), d.id).to.deep.equal(d);
          }
        }),
        { numRuns: 40 },
      );
    });
  });
}
