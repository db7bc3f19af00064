// In-memory DocumentStore (API servers without Redis, scripts/rebuild.ts, tests): rebuilt from the log
// at every start (checkpoint 0).
// Each partition keeps its keys in insertion order, which is creation (log) order.
import type { DocumentProjection, DocumentStore, DocumentStores, EventRef, ListQuery, Page } from './tickets-store.js';

export const createMemoryDocumentStore = <D>(projection: Pick<DocumentProjection<D>, 'partitionOf'>): DocumentStore<D> => {
  const docs = new Map<string, D>();
  const partitions = new Map<string, Set<string>>();
  let checkpoint: EventRef | null = null;

  const list = (query: ListQuery): Page<D> => {
    const keys = [...(partitions.get(query.partition) ?? [])];
    const where = Object.entries(query.where ?? {});
    const matching = keys
      .map((k) => docs.get(k) as D)
      .filter((doc) => where.every(([field, value]) => (doc as Record<string, unknown>)[field] === value));
    if (query.newestFirst) matching.reverse();
    const start = (query.page - 1) * query.pageSize;
    return { items: matching.slice(start, start + query.pageSize), total: matching.length };
  };

  return {
    checkpoint: async () => checkpoint,
    get: async (key) => docs.get(key),
    // Synchronous: the embedded runner then applies without a promise per event. One process applies
    // in log order, so a position at or below the checkpoint was applied already.
    apply(event, key, evolve) {
      if (event.position <= (checkpoint?.position ?? 0)) return;
      checkpoint = event;
      if (key === null) return;
      const doc = evolve(docs.get(key));
      if (doc === undefined) return;
      const partition = projection.partitionOf(doc);
      let keys = partitions.get(partition);
      if (keys === undefined) partitions.set(partition, (keys = new Set()));
      keys.add(key);
      docs.set(key, doc);
    },
    list: async (query) => list(query),
    dump: async () => new Map(docs),
    async clear() {
      docs.clear();
      partitions.clear();
      checkpoint = null;
    },
  };
};

/** The embedded mode's stores: in this process, always available. */
export const memoryDocumentStores: DocumentStores = {
  open: (projection) => createMemoryDocumentStore(projection),
  available: () => true,
  connected: async () => true,
  onReconnect: () => undefined,
  close: async () => undefined,
};
