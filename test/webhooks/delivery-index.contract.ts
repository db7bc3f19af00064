// One contract for every DeliveryIndex adapter: pages by cursor in listing order, each filter and
// their combinations against a brute-force reading of the same deliveries, the checkpoint, what a
// restart takes over, a subscription's waiting deliveries as of its stream's revision, retention
// pruning and a deleted subscription.
import { expect } from 'chai';
import type { DeliveryStatus } from '../../src/domain/delivery/delivery.js';
import type { DeliveryIndex, HistoryQuery } from '../../projections/deliveries-index.js';
import type { ProjectedEvent } from '../../projections/tickets-store.js';
import { deliveryLog } from '../support/delivery-steps.js';

export interface DeliveryIndexFixture {
  readonly index: DeliveryIndex;
  /** The same store opened again (a restart), where the adapter outlives its process; null otherwise. */
  reopen: (() => Promise<DeliveryIndex>) | null;
  teardown(): Promise<void>;
}

const T0 = 1_700_000_000_000_000; // µs today: must survive the store's number types exactly
const TYPES = ['ticket.created', 'ticket.updated', 'message.created'];

/** Every page of a query, following the cursors. */
const allPages = async (index: DeliveryIndex, query: Omit<HistoryQuery, 'after'>): Promise<{ ids: string[]; pages: number }> => {
  const ids: string[] = [];
  let pages = 0;
  for (let after: HistoryQuery['after'] | undefined; ; ) {
    const page = await index.page({ ...query, ...(after === undefined ? {} : { after }) });
    pages += 1;
    ids.push(...page.items.map((d) => d.id));
    if (page.next === null) return { ids, pages };
    expect(page.items).to.have.length(query.limit);
    after = page.next;
  }
};

export const deliveryIndexContract = (name: string, factory: () => Promise<DeliveryIndexFixture>) => {
  describe(`DeliveryIndex contract: ${name}`, () => {
    let fixture: DeliveryIndexFixture;
    beforeEach(async () => {
      fixture = await factory();
    });
    afterEach(() => fixture.teardown());

    const apply = async (events: readonly ProjectedEvent[], index = fixture.index) => {
      for (const event of events) await index.apply(event);
    };

    it('lists a subscription newest first, a page at a time, each delivery once, with no cursor after the last page', async () => {
      const log = deliveryLog(T0);
      // Equal creation times are ordered by id: the cursor carries both.
      const events = Array.from({ length: 23 }, (_, i) => log.record('s1', log.schedule('s1', `d${String(i).padStart(2, '0')}`, { at: T0 + Math.floor(i / 3) })));
      await apply([...events, log.record('s2', log.schedule('s2', 'other'))]);
      const expected = [...log.states.values()]
        .filter((d) => d.subscriptionId === 's1')
        .sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1))
        .map((d) => d.id);
      const { ids, pages } = await allPages(fixture.index, { subscriptionId: 's1', limit: 5 });
      expect(ids).to.deep.equal(expected);
      expect(pages).to.equal(5);
      expect((await allPages(fixture.index, { subscriptionId: 's1', limit: 23 })).pages).to.equal(1);
      const first = await fixture.index.page({ subscriptionId: 's1', limit: 1 });
      expect(first.items[0]).to.deep.equal(log.states.get(expected[0] as string));
    });

    it('lists deliveries recorded out of their creation order in listing order all the same', async () => {
      const log = deliveryLog(T0);
      const times = [5, 1, 9, 5, 3, 9, 0, 7];
      await apply(times.map((t, i) => log.record('s1', log.schedule('s1', `d${i}`, { at: T0 + t }))));
      const expected = [...log.states.values()].sort((a, b) => b.createdAt - a.createdAt || (a.id < b.id ? 1 : -1)).map((d) => d.id);
      expect((await allPages(fixture.index, { subscriptionId: 's1', limit: 3 })).ids).to.deep.equal(expected);
    });

    it('answers an empty page, without a cursor, for a subscription it has nothing of', async () => {
      const log = deliveryLog(T0);
      await apply([log.record('s1', log.schedule('s1', 'd1'))]);
      expect(await fixture.index.page({ subscriptionId: 'nobody', limit: 10 })).to.deep.equal({ items: [], next: null });
      expect(await fixture.index.get('nobody', 'd1')).to.equal(undefined);
      expect(await fixture.index.get('s1', 'unknown')).to.equal(undefined);
    });

    it('filters by status, event type and creation time, alone and together, as a reading of every delivery would', async () => {
      const log = deliveryLog(T0);
      const events: ProjectedEvent[] = [];
      const outcomes = ['waiting', 'delivered', 'failed', 'cancelled', 'retry'] as const;
      for (let i = 0; i < 60; i++) {
        const id = `d${String(i).padStart(2, '0')}`;
        events.push(log.record('s1', log.schedule('s1', id, { eventType: TYPES[i % 3] as string, at: T0 + i * 1000 })));
        const outcome = outcomes[(i * 7) % 5] as (typeof outcomes)[number];
        if (outcome === 'delivered' || outcome === 'failed' || outcome === 'retry') events.push(log.record('s1', log.attempt(id, outcome)));
        if (outcome === 'cancelled') events.push(log.record('s1', log.cancel(id)));
      }
      await apply(events);
      const all = [...log.states.values()].sort((a, b) => b.createdAt - a.createdAt);
      const statuses: (DeliveryStatus | undefined)[] = [undefined, 'waiting', 'delivered', 'failed', 'cancelled'];
      for (const status of statuses) {
        for (const eventType of [undefined, 'ticket.updated']) {
          for (const [createdFrom, createdBefore] of [[undefined, undefined], [T0 + 10_000, undefined], [undefined, T0 + 40_000], [T0 + 10_000, T0 + 40_000]]) {
            const query = {
              subscriptionId: 's1',
              limit: 4,
              ...(status === undefined ? {} : { status }),
              ...(eventType === undefined ? {} : { eventType }),
              ...(createdFrom === undefined ? {} : { createdFrom }),
              ...(createdBefore === undefined ? {} : { createdBefore }),
            };
            const expected = all.filter(
              (d) =>
                (status === undefined || d.status === status) &&
                (eventType === undefined || d.eventType === eventType) &&
                (createdFrom === undefined || d.createdAt >= createdFrom) &&
                (createdBefore === undefined || d.createdAt < createdBefore),
            );
            expect((await allPages(fixture.index, query)).ids, JSON.stringify(query)).to.deep.equal(expected.map((d) => d.id));
          }
        }
      }
    });

    it('moves a delivery between status filters as its steps arrive, several steps in one record included', async () => {
      const log = deliveryLog(T0);
      await apply([log.record('s1', [...log.schedule('s1', 'd1'), ...log.attempt('d1', 'retry')])]);
      const ids = async (status: DeliveryStatus) => (await fixture.index.page({ subscriptionId: 's1', status, limit: 10 })).items.map((d) => d.id);
      expect(await ids('waiting')).to.deep.equal(['d1']);
      await apply([log.record('s1', log.attempt('d1', 'failed'))]);
      expect(await ids('waiting')).to.deep.equal([]);
      expect(await ids('failed')).to.deep.equal(['d1']);
      await apply([log.record('s1', log.retry('d1'))]);
      expect(await ids('failed')).to.deep.equal([]);
      expect((await fixture.index.get('s1', 'd1'))?.delivery.round).to.equal(2);
      const found = await fixture.index.get('s1', 'd1');
      expect(found?.delivery).to.deep.equal(log.states.get('d1'));
      // A position the delivery is at least as recent as: folding the records after it on top changes nothing applied twice.
      expect(found?.position).to.be.at.most((await fixture.index.checkpoint()).position);
    });

    it('keeps its checkpoint and applies an event at or below it only once', async () => {
      const log = deliveryLog(T0);
      expect(await fixture.index.checkpoint()).to.deep.equal({ position: 0, fannedOutThrough: 0 });
      const scheduled = log.record('s1', log.schedule('s1', 'd1', { eventPosition: 40, fannedOutThrough: 39 }));
      const attempted = log.record('s1', log.attempt('d1', 'retry'));
      await apply([scheduled, attempted]);
      expect(await fixture.index.checkpoint()).to.deep.equal({ position: attempted.position, fannedOutThrough: 39 });
      // A repeated record (a runner resuming below what it applied) changes nothing.
      await apply([scheduled, attempted]);
      expect((await fixture.index.get('s1', 'd1'))?.delivery.history).to.have.length(1);
      if (fixture.reopen !== null) {
        await new Promise((resolve) => setImmediate(resolve));
        const reopened = await fixture.reopen();
        expect(await reopened.checkpoint()).to.deep.equal({ position: attempted.position, fannedOutThrough: 39 });
        expect((await reopened.get('s1', 'd1'))?.delivery).to.deep.equal(log.states.get('d1'));
      }
    });

    it('hands a restart the waiting deliveries and those of events past the fan-out checkpoint, not the settled history', async () => {
      const log = deliveryLog(T0);
      await apply([
        log.record('s1', [...log.schedule('s1', 'settled', { eventPosition: 5, fannedOutThrough: 4 }), ...log.attempt('settled', 'delivered')]),
        log.record('s1', log.schedule('s1', 'waiting', { eventPosition: 6, fannedOutThrough: 5 })),
        log.record('s2', [...log.schedule('s2', 'ahead', { eventPosition: 9, fannedOutThrough: 5 }), ...log.attempt('ahead', 'delivered')]),
      ]);
      const pending = await fixture.index.pending();
      expect(pending.fannedOutThrough).to.equal(5);
      expect(pending.deliveries.map((p) => p.delivery.id).sort()).to.deep.equal(['ahead', 'waiting']);
      expect(pending.deliveries.find((p) => p.delivery.id === 'waiting')).to.deep.equal({ delivery: log.states.get('waiting'), workspaceId: 'ws' });
    });

    it('pages what a restart takes over: the same deliveries as read at once, each once', async () => {
      const log = deliveryLog(T0);
      const events: ProjectedEvent[] = [];
      for (let i = 0; i < 30; i++) {
        const scheduled = log.schedule(`s${i % 3}`, `d${i}`, { eventPosition: i + 1, fannedOutThrough: 24 });
        // Every third settled: those of events up to 24 are history, those past it a restart needs.
        events.push(log.record(`s${i % 3}`, i % 3 === 0 ? [...scheduled, ...log.attempt(`d${i}`, 'delivered')] : scheduled));
      }
      await apply(events);
      const whole = await fixture.index.pending();
      const paged = await fixture.index.pendingPages(4);
      expect(paged.fannedOutThrough).to.equal(whole.fannedOutThrough);
      const taken = [];
      for await (const indexed of paged.deliveries) taken.push(indexed);
      const byId = (a: { delivery: { id: string } }, b: { delivery: { id: string } }) => a.delivery.id.localeCompare(b.delivery.id);
      expect(taken.sort(byId)).to.deep.equal([...whole.deliveries].sort(byId));
      expect(taken.map(({ delivery }) => delivery.id)).to.include.members(['d27', 'd28', 'd29', 'd1', 'd2']).and.not.include('d0');
    });

    it('prunes settled deliveries created before the cutoff, a batch at a time, and keeps what a restart needs', async () => {
      const log = deliveryLog(T0);
      const events: ProjectedEvent[] = [];
      for (let i = 0; i < 5; i++) {
        const steps = [...log.schedule('s1', `old${i}`, { at: T0 + i, eventPosition: i + 1, fannedOutThrough: 5 }), ...log.attempt(`old${i}`, i % 2 === 0 ? 'delivered' : 'failed')];
        events.push(log.record('s1', steps));
      }
      events.push(log.record('s1', log.schedule('s1', 'old-waiting', { at: T0 + 10 })));
      // Settled, old, but of an event the fan-out checkpoint has not passed: a restart replays that event.
      events.push(log.record('s1', [...log.schedule('s1', 'old-unpassed', { at: T0 + 11, eventPosition: 6 }), ...log.attempt('old-unpassed', 'delivered')]));
      events.push(log.record('s1', [...log.schedule('s1', 'new', { at: T0 + 1_000_000 }), ...log.attempt('new', 'delivered')]));
      await apply(events);
      expect(await fixture.index.prune(T0 + 500_000, 3)).to.equal(3);
      expect(await fixture.index.prune(T0 + 500_000, 3)).to.equal(2);
      expect(await fixture.index.prune(T0 + 500_000, 3)).to.equal(0);
      expect((await allPages(fixture.index, { subscriptionId: 's1', limit: 10 })).ids).to.deep.equal(['new', 'old-unpassed', 'old-waiting']);
      // A later step of a pruned delivery (a retry from the log) does not bring back half a delivery.
      await apply([log.record('s1', log.retry('old1'))]);
      expect(await fixture.index.get('s1', 'old1')).to.equal(undefined);
    });

    it("counts a replay's deliveries by status as they change, apart from the live ones and other subscriptions'", async () => {
      const log = deliveryLog(T0);
      await apply([
        log.record('s1', [...log.schedule('s1', 'live', { eventPosition: 3 }), ...log.attempt('live', 'failed')]),
        log.record('s1', [...log.schedule('s1', 'r1', { replayId: 'R' }), ...log.schedule('s1', 'r2', { replayId: 'R' }), ...log.schedule('s1', 'r3', { replayId: 'R' })]),
        log.record('s1', [...log.attempt('r1', 'delivered'), ...log.attempt('r2', 'failed')]),
        log.record('s1', log.schedule('s1', 'other-replay', { replayId: 'Q' })),
      ]);
      expect(await fixture.index.replayOutcomes('s1', 'R')).to.deep.equal({ waiting: 1, delivered: 1, failed: 1, cancelled: 0, attempted: 2 });
      expect((await fixture.index.get('s1', 'r1'))?.delivery.replayId).to.equal('R');
      expect((await fixture.index.get('s1', 'live'))?.delivery.replayId).to.equal(null);
      // A manual retry of the failed one moves it back to waiting; then it is delivered.
      await apply([log.record('s1', log.retry('r2')), log.record('s1', log.attempt('r2', 'delivered'))]);
      expect(await fixture.index.replayOutcomes('s1', 'R')).to.deep.equal({ waiting: 1, delivered: 2, failed: 0, cancelled: 0, attempted: 2 });
      expect(await fixture.index.replayOutcomes('s2', 'R')).to.deep.equal({ waiting: 0, delivered: 0, failed: 0, cancelled: 0, attempted: 0 });
      await apply([log.deleted('s1')]);
      expect(await fixture.index.replayOutcomes('s1', 'R')).to.deep.equal({ waiting: 0, delivered: 0, failed: 0, cancelled: 0, attempted: 0 });
    });

    it("reads a subscription's waiting deliveries with the last record of its stream applied, and how many wait, in one read each", async () => {
      const log = deliveryLog(T0);
      expect(await fixture.index.waitingOf('s1')).to.deep.equal({ deliveries: [], workspaceId: null, revision: -1, position: 0 });
      expect(await fixture.index.appliedOf('s1')).to.deep.equal({ revision: -1, waiting: 0 });
      const first = log.record('s1', [...log.schedule('s1', 'd1'), ...log.schedule('s1', 'd2'), ...log.schedule('s1', 'd3')]);
      const other = log.record('s2', log.schedule('s2', 'elsewhere'));
      const second = log.record('s1', [...log.attempt('d1', 'delivered'), ...log.attempt('d2', 'retry')]);
      await apply([first, other, second]);
      const waitingOf = async (subscriptionId: string) => {
        const read = await fixture.index.waitingOf(subscriptionId);
        return { ...read, deliveries: [...read.deliveries].sort((a, b) => (a.id < b.id ? -1 : 1)) };
      };
      expect(await waitingOf('s1')).to.deep.equal({ deliveries: [log.states.get('d2'), log.states.get('d3')], workspaceId: 'ws', revision: second.revision, position: second.position });
      expect(await fixture.index.appliedOf('s1')).to.deep.equal({ revision: second.revision, waiting: 2 });
      expect(await waitingOf('s2')).to.deep.equal({ deliveries: [log.states.get('elsewhere')], workspaceId: 'ws', revision: other.revision, position: other.position });
      // Settled and cancelled ones leave; one retried by hand waits again.
      await apply([log.record('s1', [...log.attempt('d2', 'failed'), ...log.cancel('d3')])]);
      const retried = log.record('s1', log.retry('d2'));
      await apply([retried]);
      expect(await waitingOf('s1')).to.deep.equal({ deliveries: [log.states.get('d2')], workspaceId: 'ws', revision: retried.revision, position: retried.position });
      let { index } = fixture;
      if (fixture.reopen !== null) {
        await new Promise((resolve) => setImmediate(resolve));
        index = await fixture.reopen();
        expect(await index.appliedOf('s1')).to.deep.equal({ revision: retried.revision, waiting: 1 });
      }
      await apply([log.deleted('s1')], index);
      expect(await index.waitingOf('s1')).to.deep.equal({ deliveries: [], workspaceId: null, revision: -1, position: 0 });
      await index.forget('s2');
      expect(await index.appliedOf('s2')).to.deep.equal({ revision: -1, waiting: 0 });
      await apply([log.record('s3', log.schedule('s3', 'd4'))], index);
      await index.clear();
      expect(await index.appliedOf('s3')).to.deep.equal({ revision: -1, waiting: 0 });
    });

    it('tells which deliveries it has, each only under its own subscription, in the order asked', async () => {
      const log = deliveryLog(T0);
      expect(await fixture.index.has([])).to.deep.equal([]);
      await apply([log.record('s1', [...log.schedule('s1', 'd1'), ...log.schedule('s1', 'd3')]), log.record('s2', log.schedule('s2', 'd2'))]);
      const asked = [
        { subscriptionId: 's1', deliveryId: 'd1' },
        { subscriptionId: 's2', deliveryId: 'd1' },
        { subscriptionId: 's1', deliveryId: 'unknown' },
        { subscriptionId: 's2', deliveryId: 'd2' },
        { subscriptionId: 's1', deliveryId: 'd3' },
      ];
      expect(await fixture.index.has(asked)).to.deep.equal([true, false, false, true, true]);
      // Settled, then gone with its subscription.
      await apply([log.record('s1', log.attempt('d1', 'delivered')), log.deleted('s2')]);
      expect(await fixture.index.has(asked)).to.deep.equal([true, false, false, false, true]);
    });

    it('forgets a history longer than it deletes at once, by its marker and when asked, and nothing of the others', async () => {
      const log = deliveryLog(T0);
      // In records of 500, as a busy dispatcher packs them; more than any adapter deletes in one go.
      const history = (subscriptionId: string, count: number): ProjectedEvent[] =>
        Array.from({ length: Math.ceil(count / 500) }, (_, r) =>
          log.record(subscriptionId, Array.from({ length: Math.min(500, count - r * 500) }, (_, i) => log.schedule(subscriptionId, `${subscriptionId}-${r * 500 + i}`)).flat()),
        );
      await apply([...history('s1', 2_500), ...history('s2', 2_500), ...history('s3', 10)]);
      await apply([log.deleted('s1')]);
      await fixture.index.forget('s2');
      expect((await fixture.index.page({ subscriptionId: 's2', limit: 10 })).items, 'gone once forget resolves').to.deep.equal([]);
      // The marker's may go on after the apply, a batch at a time.
      for (const deadline = Date.now() + 10_000; (await fixture.index.page({ subscriptionId: 's1', limit: 10 })).items.length > 0; ) {
        if (Date.now() > deadline) throw new Error("s1's history is still there 10 s after its marker");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await fixture.index.page({ subscriptionId: 's3', limit: 100 })).items).to.have.length(10);
      expect((await fixture.index.pending()).deliveries.map((p) => p.delivery.subscriptionId)).to.deep.equal(Array(10).fill('s3'));
    });

    it("forgets a deleted subscription's history, and everything on clear", async () => {
      const log = deliveryLog(T0);
      await apply([log.record('s1', log.schedule('s1', 'd1')), log.record('s2', log.schedule('s2', 'd2')), log.deleted('s1')]);
      expect((await fixture.index.page({ subscriptionId: 's1', limit: 10 })).items).to.deep.equal([]);
      expect((await fixture.index.pending()).deliveries.map((p) => p.delivery.id)).to.deep.equal(['d2']);
      // A deletion whose marker the runner never read (the DELETE removes it with the stream).
      await fixture.index.forget('s2');
      expect((await fixture.index.page({ subscriptionId: 's2', limit: 10 })).items).to.deep.equal([]);
      expect((await fixture.index.pending()).deliveries).to.deep.equal([]);
      await apply([log.record('s3', log.schedule('s3', 'd3'))]);
      await fixture.index.clear();
      expect(await fixture.index.checkpoint()).to.deep.equal({ position: 0, fannedOutThrough: 0 });
      expect((await fixture.index.page({ subscriptionId: 's3', limit: 10 })).items).to.deep.equal([]);
    });
  });
};
