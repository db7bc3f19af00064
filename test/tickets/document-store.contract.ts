// One contract for every DocumentStore adapter (projections/tickets-store.ts).
import { expect } from 'chai';
import type { DocumentProjection, DocumentStore, EventRef } from '../../projections/tickets-store.js';

export interface Row {
  readonly id: string;
  readonly ws: string;
  readonly status: string;
  readonly contact_id: string | null;
  readonly n: number;
  /** The events applied, in order (the concurrent appliers' test). */
  readonly applied?: string;
}

/** The projection shape a store sees: partitions by workspace, filters on two fields. */
export const ROWS: Pick<DocumentProjection<Row>, 'name' | 'version' | 'filters' | 'partitionOf'> = {
  name: 'contract-rows',
  version: 1,
  filters: ['status', 'contact_id'],
  partitionOf: (row) => row.ws,
};

/** The event at `position` of a made-up log. */
export const ref = (position: number): EventRef => ({ id: `event-${position}`, position, stream: `stream-${position % 3}`, revision: position });

/** Opens a store, and returns a way to open more handles on the same data (another process's view of it). */
export type OpenStores = () => Promise<() => DocumentStore<Row>>;

export const documentStoreContract = (name: string, open: OpenStores | null) => {
  describe(`DocumentStore contract: ${name}`, () => {
    if (open === null) {
      it('runs when its engine is configured');
      return;
    }
    let handle: () => DocumentStore<Row>;
    let store: DocumentStore<Row>;
    let position = 0;
    const row = (id: string, over: Partial<Row> = {}): Row => ({ id, ws: 'w1', status: 'open', contact_id: 'c1', n: 1_700_000_000_000_123, ...over });
    const save = (doc: Row) => store.apply(ref(++position), doc.id, () => doc);
    const ids = async (query: Parameters<DocumentStore<Row>['list']>[0]) => {
      const page = await store.list(query);
      return { ids: page.items.map((r) => r.id), total: page.total };
    };
    beforeEach(async () => {
      handle = await open();
      store = handle();
      // A runner reads the checkpoint before it applies.
      expect(await store.checkpoint()).to.equal(null);
      position = 0;
    });

    it('keeps documents whole with the checkpoint, which never goes back', async () => {
      expect(await store.get('t1')).to.equal(undefined);
      await save(row('t1'));
      await store.apply(ref(5), null, () => undefined);
      await store.apply(ref(3), null, () => undefined);
      expect(await store.checkpoint()).to.deep.equal(ref(5));
      expect(await store.get('t1')).to.deep.equal(row('t1'));
      await store.apply(ref(6), 't1', (doc) => doc && { ...doc, contact_id: null });
      expect(await store.get('t1')).to.deep.equal(row('t1', { contact_id: null }));
      // An event that creates nothing, or changes nothing, leaves the store as it is.
      await store.apply(ref(7), 't2', () => undefined);
      await store.apply(ref(8), 't1', (doc) => doc);
      expect([...(await store.dump())]).to.deep.equal([['t1', row('t1', { contact_id: null })]]);
      expect(await store.checkpoint()).to.deep.equal(ref(8));
    });

    it('applies an event to a document once, however many appliers see it, each in log order', async () => {
      // Events 1..40 touch four documents; each appends its number to the document's `applied`.
      const events = Array.from({ length: 40 }, (_, i) => ({ position: i + 1, key: `d${i % 4}` }));
      const applyOne = (applier: DocumentStore<Row>, e: (typeof events)[number]) =>
        applier.apply(ref(e.position), e.key, (doc) => ({ ...(doc ?? row(e.key)), applied: `${doc?.applied ?? ''},${e.position}` }));
      const applyAll = async (applier: DocumentStore<Row>, from = 0, to = events.length) => {
        await applier.checkpoint();
        for (const e of events.slice(from, to)) await applyOne(applier, e);
      };
      /** Without waiting for each apply before the next, as a runner does. */
      const pipeline = async (applier: DocumentStore<Row>, from: number) => {
        await applier.checkpoint();
        await Promise.all(events.slice(from).map((e) => applyOne(applier, e)));
      };
      // Four appliers on the same data: one from the start, three resuming from the checkpoint at 10.
      await applyAll(store, 0, 10);
      await Promise.all([applyAll(store, 10), applyAll(handle()), applyAll(handle(), 10), pipeline(handle(), 10)]);
      await applyAll(store);
      const docs = await store.dump();
      for (let k = 0; k < 4; k++) {
        const expected = events.filter((e) => e.key === `d${k}`).map((e) => `,${e.position}`).join('');
        expect(docs.get(`d${k}`)?.applied, `d${k}`).to.equal(expected);
      }
      expect(await store.checkpoint()).to.deep.equal(ref(40));
    });

    it('is empty after clear, and applies again from there', async () => {
      await save(row('a'));
      await save(row('b', { status: 'closed' }));
      await store.clear();
      expect(await store.checkpoint()).to.equal(null);
      expect((await store.dump()).size).to.equal(0);
      expect(await ids({ partition: 'w1', newestFirst: false, page: 1, pageSize: 10, where: { status: 'closed' } })).to.deep.equal({ ids: [], total: 0 });
      position = 0;
      await save(row('c'));
      expect(await ids({ partition: 'w1', newestFirst: false, page: 1, pageSize: 10 })).to.deep.equal({ ids: ['c'], total: 1 });
      expect(await store.checkpoint()).to.deep.equal(ref(1));
    });

    it('lists a partition in creation order, either way, a page at a time with the total', async () => {
      for (const id of ['a', 'b', 'c', 'd', 'e']) await save(row(id));
      await save(row('x', { ws: 'w2' }));
      await save(row('b', { n: 2 })); // an update keeps the creation order
      expect(await ids({ partition: 'w1', newestFirst: false, page: 1, pageSize: 2 })).to.deep.equal({ ids: ['a', 'b'], total: 5 });
      expect(await ids({ partition: 'w1', newestFirst: true, page: 1, pageSize: 2 })).to.deep.equal({ ids: ['e', 'd'], total: 5 });
      expect(await ids({ partition: 'w1', newestFirst: true, page: 3, pageSize: 2 })).to.deep.equal({ ids: ['a'], total: 5 });
      expect(await ids({ partition: 'w1', newestFirst: true, page: 4, pageSize: 2 })).to.deep.equal({ ids: [], total: 5 });
      expect(await ids({ partition: 'none', newestFirst: true, page: 1, pageSize: 2 })).to.deep.equal({ ids: [], total: 0 });
      expect((await store.list({ partition: 'w1', newestFirst: false, page: 1, pageSize: 2 })).items[1]).to.deep.equal(row('b', { n: 2 }));
    });

    it('filters on the projection fields, following changes of the filtered values', async () => {
      await save(row('a'));
      await save(row('b', { status: 'closed' }));
      await save(row('c', { contact_id: 'c2' }));
      await save(row('d', { status: 'closed', contact_id: 'c2' }));
      await save(row('e', { ws: 'w2', status: 'closed' }));
      const query = { partition: 'w1', newestFirst: false, page: 1, pageSize: 10 };
      expect(await ids({ ...query, where: { status: 'closed' } })).to.deep.equal({ ids: ['b', 'd'], total: 2 });
      expect(await ids({ ...query, where: { status: 'closed', contact_id: 'c2' } })).to.deep.equal({ ids: ['d'], total: 1 });
      expect(await ids({ ...query, where: { status: 'pending' } })).to.deep.equal({ ids: [], total: 0 });
      await save(row('a', { status: 'closed' }));
      await save(row('d', { status: 'open', contact_id: null }));
      expect(await ids({ ...query, where: { status: 'closed' } })).to.deep.equal({ ids: ['a', 'b'], total: 2 });
      expect(await ids({ ...query, where: { contact_id: 'c2' } })).to.deep.equal({ ids: ['c'], total: 1 });
      expect(await ids({ ...query, newestFirst: true, pageSize: 1, where: { status: 'open' } })).to.deep.equal({ ids: ['d'], total: 2 });
    });
  });
};
