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
import { packSteps, type Delivery } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createWaitingDeliveries, type WaitingDeliveries, type WaitingView } from '../../src/webhooks/dispatch/waiting.js';
import type { DeliveryIndex, WaitingReader } from '../../projections/deliveries-index.js';
import { createMemoryDeliveryIndex } from '../../projections/deliveries-index-memory.js';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import { appendHistory, deliveryRecords, historyRecords, indexFeeder, watched, wholeStream } from '../support/delivery-steps.js';

/** The view `read` gives of subscription 's', which has too few waiting for it not to be kept. */
const kept = async (waiting: WaitingDeliveries): Promise<WaitingView> => {
  const view = await waiting.read('s');
  if (view === null) throw new Error('not kept');
  return view;
};

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
    const view = await kept(createWaitingDeliveries(mine));
    expect([...view.deliveries.keys()]).to.deep.equal([]);
    expect(view.workspaceId).to.equal(null);
  });

  it('follows what any writer appends later, keeping only the deliveries still waiting', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a'), scheduled('b'), scheduled('c')]);
    expect([...(await kept(waiting)).deliveries.keys()]).to.deep.equal(['a', 'b', 'c']);
    await append(other, [attempted('a', true), attempted('b', false)]);
    const view = await kept(waiting);
    expect([...view.deliveries.keys()]).to.deep.equal(['b', 'c']);
    expect(view.deliveries.get('b')).to.include({ status: 'waiting', attempt: 1, nextAttemptAt: 30 });
    expect(view.workspaceId).to.equal('w');
  });

  it('gives concurrent readers a view that includes everything appended before they asked', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a')]);
    const first = kept(waiting);
    await append(other, [scheduled('b')]);
    const [, second] = await Promise.all([first, kept(waiting)]);
    expect([...second.deliveries.keys()]).to.deep.equal(['a', 'b']);
  });
});

/** The waiting deliveries a reading of the whole stream gives. */
const waitingOfWholeStream = async (log: EventLog): Promise<Delivery[]> => sorted(await wholeStream(log)).filter((d) => d.status === 'waiting');
const sorted = (deliveries: ReadonlyMap<string, Delivery>): Delivery[] => [...deliveries.values()].sort((a, b) => (a.id < b.id ? -1 : 1));

for (const adapter of ['sqlite', 'memory'] as const) {
  describe(`waiting deliveries started from the delivery-history index (${adapter} index, real SQLite log)`, () => {
    let dir: string;
    let log: SqliteEventLog;
    let index: DeliveryIndex;
    let feed: ReturnType<typeof indexFeeder>;
    const applyNext = (count?: number): Promise<void> => feed.applyNext(count);

    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'waiting-seeded-'));
      log = openSqliteLog({ file: join(dir, 'events.sqlite'), durability: 'relaxed' });
      index = adapter === 'sqlite' ? openSqliteDeliveryIndex({ file: join(dir, 'history.sqlite') }) : createMemoryDeliveryIndex();
      feed = indexFeeder(log, index);
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
      const view = await kept(createWaitingDeliveries(reads.log, index));
      expect(reads.from).to.deep.equal([50]);
      expect(sorted(view.deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      expect(view.workspaceId).to.equal('w');
      expect(view.position).to.equal((await log.readStream(deliveryStream('s'))).at(-1)?.position);
    });

    it('starts a view left alone over again when the index is further ahead of it than what waits, and reads on otherwise', async () => {
      const records = deliveryRecords(log);
      const reads = watched(log);
      const waiting = createWaitingDeliveries(reads.log, index, 0);
      await records.append(records.schedule('first'));
      await kept(waiting);
      // Twenty records past the view, the index has applied them all, and one delivery waits: started over.
      for (let i = 0; i < 10; i++) {
        await records.append(records.schedule(`d${i}`));
        await records.append(records.attempt(`d${i}`, 'delivered'));
      }
      await applyNext();
      reads.from.length = 0;
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      expect(reads.from).to.deep.equal([21]);
      // Two records past it and five waiting: catching up reads less.
      await records.append([...records.schedule('w1'), ...records.schedule('w2'), ...records.schedule('w3')]);
      await records.append(records.schedule('w4'));
      await applyNext();
      reads.from.length = 0;
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      expect(reads.from).to.deep.equal([21]);
      // A cold view asks how many wait (too many are not kept), then starts from the index; within
      // the stale time nothing more is asked of it.
      const asked: string[] = [];
      const counted: WaitingReader = { waitingOf: (s) => (asked.push('waitingOf'), index.waitingOf(s)), appliedOf: (s) => (asked.push('appliedOf'), index.appliedOf(s)), replayFirsts: (s, r) => index.replayFirsts(s, r) };
      const fresh = createWaitingDeliveries(log, counted, 60_000);
      await kept(fresh);
      await records.append(records.attempt('w1', 'delivered'));
      expect(sorted((await kept(fresh)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      expect(asked).to.deep.equal(['appliedOf', 'waitingOf']);
    });

    it('keeps a delivery retried by hand after it settled, which a view read from the first record loses', async () => {
      const records = deliveryRecords(log);
      await records.append(records.schedule('a'));
      await records.append([...records.attempt('a', 'retry'), ...records.attempt('a', 'failed')]);
      expect(records.states.get('a')?.status).to.equal('failed');
      await records.append(records.retry('a'));
      await applyNext();
      const view = await kept(createWaitingDeliveries(log, index));
      expect(sorted(view.deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      expect(view.deliveries.get('a')).to.include({ status: 'waiting', round: 2 });
      expect((await kept(createWaitingDeliveries(log))).deliveries.has('a')).to.equal(false);
    });

    it('reads the stream from its first record, all the same, when the index cannot be reached', async () => {
      const records = deliveryRecords(log);
      await records.append([...records.schedule('a'), ...records.schedule('b')]);
      await records.append(records.attempt('a', 'delivered'));
      await applyNext();
      const unreachable: WaitingReader = { waitingOf: () => Promise.reject(new Error('ECONNREFUSED')), appliedOf: () => Promise.reject(new Error('ECONNREFUSED')), replayFirsts: () => Promise.reject(new Error('ECONNREFUSED')) };
      const reads = watched(log);
      const warned: unknown[] = [];
      const warn = console.warn;
      console.warn = (...args: unknown[]) => void warned.push(args);
      try {
        const waiting = createWaitingDeliveries(reads.log, unreachable, 0);
        expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
        await records.append(records.schedule('c'));
        expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      } finally {
        console.warn = warn;
      }
      expect(reads.from).to.deep.equal([0, 2]);
      expect(warned).to.have.length(1);
    });

    it('keeps no view of a subscription with more waiting than the bound: read gives null after one look at the index, until under half of it', async () => {
      const records = deliveryRecords(log);
      for (let i = 0; i < 6; i++) await records.append(records.schedule(`d${i}`));
      await applyNext();
      const reads = watched(log);
      const asked: string[] = [];
      const counted: WaitingReader = { waitingOf: (s) => (asked.push('waitingOf'), index.waitingOf(s)), appliedOf: (s) => (asked.push('appliedOf'), index.appliedOf(s)), replayFirsts: (s, r) => index.replayFirsts(s, r) };
      const waiting = createWaitingDeliveries(reads.log, counted, 0, 4);
      expect(await waiting.read('s')).to.equal(null);
      expect(asked).to.deep.equal(['appliedOf']);
      expect(reads.from, 'nothing read of the stream').to.deep.equal([]);
      // Three settle: three wait, over half the bound, still not kept.
      for (let i = 0; i < 3; i++) await records.append(records.attempt(`d${i}`, 'delivered'));
      await applyNext();
      expect(await waiting.read('s')).to.equal(null);
      // One more: two wait, kept again.
      await records.append(records.attempt('d3', 'delivered'));
      await applyNext();
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
    });

    it('lets a kept view go once it has grown past the bound, giving it a last time', async () => {
      const records = deliveryRecords(log);
      const waiting = createWaitingDeliveries(log, index, 0, 4);
      await records.append(records.schedule('a'));
      await applyNext();
      expect((await kept(waiting)).deliveries.size).to.equal(1);
      // The receiver went down: five more wait.
      for (let i = 0; i < 5; i++) await records.append(records.schedule(`d${i}`));
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      await applyNext();
      expect(await waiting.read('s')).to.equal(null);
    });

    it('keeps a view however many wait where there is no index to ask', async () => {
      const records = deliveryRecords(log);
      for (let i = 0; i < 6; i++) await records.append(records.schedule(`d${i}`));
      const waiting = createWaitingDeliveries(log, undefined, 0, 4);
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
      await records.append(records.schedule('d6'));
      expect(sorted((await kept(waiting)).deliveries)).to.deep.equal(await waitingOfWholeStream(log));
    });

    it('gives what a reading of the whole stream gives, whatever the index has applied when each read comes (property)', async () => {
      const round = fc.record({ steps: historyRecords, indexed: fc.nat(8), stale: fc.boolean() });
      await fc.assert(
        fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 5 }), async (rounds) => {
          await log.deleteStream(deliveryStream('s'));
          await index.clear();
          feed.reset();
          const records = deliveryRecords(log);
          const waiting = createWaitingDeliveries(log, index, 0);
          const fresh = createWaitingDeliveries(log, index, Infinity);
          // Kept while at most 3 wait: when it gives a view at all, the same view.
          const bounded = createWaitingDeliveries(log, index, 0, 3);
          let scheduled = 0;
          for (const { steps, indexed, stale } of rounds) {
            await appendHistory(records, steps, () => `d${(scheduled += 1)}`);
            await applyNext(indexed);
            const expected = await waitingOfWholeStream(log);
            const boundedView = await bounded.read('s');
            if (boundedView === null) expect((await index.appliedOf('s')).waiting, 'null only with more than half the bound waiting').to.be.greaterThan(1);
            for (const view of [await kept(stale ? waiting : fresh), ...(boundedView === null ? [] : [boundedView])]) {
              // A view read from the first record loses a delivery retried by hand after it had settled: never one that is not waiting.
              expect(expected).to.include.deep.members(sorted(view.deliveries));
              for (const d of expected) if (d.round === 1) expect(view.deliveries.get(d.id), d.id).to.deep.equal(d);
            }
          }
        }),
        { numRuns: 40 },
      );
    });
  });
}
