// One contract for every DocumentStore adapter (projections/tickets-store.ts).
import { expect } from 'chai';
import type { DocumentProjection, DocumentStore } from '../../projections/tickets-store.js';

export interface Row {
  readonly id: string;
  readonly ws: string;
  readonly status: string;
  readonly contact_id: string | null;
  readonly n: number;
}

/** The projection shape a store sees: partitions by workspace, filters on two fields. */
export const ROWS: Pick<DocumentProjection<Row>, 'name' | 'filters' | 'partitionOf'> = {
  name: 'contract-rows',
  filters: ['status', 'contact_id'],
  partitionOf: (row) => row.ws,
};

export const documentStoreContract = (name: string, factory: (() => Promise<DocumentStore<Row>>) | null) => {
  describe(`DocumentStore contract: ${name}`, () => {
    if (factory === null) {
      it('runs when its engine is configured');
      return;
    }
    let store: DocumentStore<Row>;
    let position = 0;
    const row = (id: string, over: Partial<Row> = {}): Row => ({ id, ws: 'w1', status: 'open', contact_id: 'c1', n: 1_700_000_000_000_123, ...over });
    const save = (doc: Row) => store.save(++position, { key: doc.id, doc });
    const ids = async (query: Parameters<DocumentStore<Row>['list']>[0]) => {
      const page = await store.list(query);
      return { ids: page.items.map((r) => r.id), total: page.total };
    };
    beforeEach(async () => {
      store = await factory();
      position = 0;
    });

    it('keeps documents whole with the checkpoint, which never goes back', async () => {
      expect(await store.checkpoint()).to.equal(0);
      expect(await store.get('t1')).to.equal(undefined);
      await save(row('t1'));
      await store.save(5);
      await store.save(3);
      expect(await store.checkpoint()).to.equal(5);
      expect(await store.get('t1')).to.deep.equal(row('t1'));
      await store.save(6, { key: 't1', doc: row('t1', { contact_id: null }) });
      expect(await store.get('t1')).to.deep.equal(row('t1', { contact_id: null }));
      expect([...(await store.dump())]).to.deep.equal([['t1', row('t1', { contact_id: null })]]);
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
