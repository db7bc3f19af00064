// The delivery-history index in this process's memory, rebuilt from the log at start: for API
// servers of the distributed mode (each tails the log itself, as their memory read models do) and
// tests. Each subscription's deliveries are kept in listing order, so a page starts with a binary
// search; filters are applied while scanning from there (a page with a rare filter scans further).
import type { Delivery } from '../src/domain/delivery/delivery.js';
import { indexChange, keyOf, listedBefore, noDeliveries, NOTHING_APPLIED, type AppliedRecord, type DeliveryIndex, type HistoryKey, type IndexCheckpoint, type IndexedDelivery, type PendingDeliveries } from './deliveries-index.js';

/** The first index of `keys` for which `holds` is false; it must hold for a prefix of them. */
const partition = (keys: readonly HistoryKey[], holds: (key: HistoryKey) => boolean): number => {
  let low = 0;
  let high = keys.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (holds(keys[middle] as HistoryKey)) low = middle + 1;
    else high = middle;
  }
  return low;
};

/** How many of `keys` (oldest first) are listed after `key`: older than it. */
const olderThan = (keys: readonly HistoryKey[], key: HistoryKey): number => partition(keys, (k) => listedBefore(key, k));

export const createMemoryDeliveryIndex = (): DeliveryIndex => {
  const byId = new Map<string, IndexedDelivery>();
  /**
   * Per subscription, its deliveries' keys oldest first (the listing order reversed): deliveries are
   * recorded in about that order, so one is appended at the end, not moved in at the front.
   */
  const bySubscription = new Map<string, HistoryKey[]>();
  let checkpoint: IndexCheckpoint = { position: 0, fannedOutThrough: 0 };
  /** Per subscription and replay, its deliveries by status, kept as they change. */
  const byReplay = new Map<string, ReturnType<typeof noDeliveries>>();
  /** Per subscription and replay, the ids of its deliveries waiting never attempted. */
  const firstsBy = new Map<string, Set<string>>();
  const replayKey = (subscriptionId: string, replayId: string): string => `${subscriptionId}/${replayId}`;
  /** Per subscription, the ids of its waiting deliveries, and the last record of its stream applied. */
  const waitingBy = new Map<string, Set<string>>();
  const applied = new Map<string, AppliedRecord>();

  const countReplay = (delivery: Delivery | undefined, by: number): void => {
    if (delivery === undefined || delivery.replayId === null) return;
    const key = replayKey(delivery.subscriptionId, delivery.replayId);
    const counts = byReplay.get(key) ?? noDeliveries();
    counts[delivery.status] += by;
    if (delivery.history.length > 0) counts.attempted += by;
    if (Object.values(counts).every((n) => n === 0)) byReplay.delete(key);
    else byReplay.set(key, counts);
    if (delivery.status !== 'waiting' || delivery.history.length > 0) return;
    const firsts = firstsBy.get(key) ?? new Set<string>();
    if (by > 0) firstsBy.set(key, firsts.add(delivery.id));
    else if (firsts.delete(delivery.id) && firsts.size === 0) firstsBy.delete(key);
  };

  const put = (entry: IndexedDelivery): void => {
    const { delivery } = entry;
    countReplay(byId.get(delivery.id)?.delivery, -1);
    countReplay(delivery, 1);
    const waiting = waitingBy.get(delivery.subscriptionId) ?? new Set<string>();
    if (delivery.status === 'waiting') waitingBy.set(delivery.subscriptionId, waiting.add(delivery.id));
    else waiting.delete(delivery.id);
    if (!byId.has(delivery.id)) {
      const keys = bySubscription.get(delivery.subscriptionId) ?? [];
      bySubscription.set(delivery.subscriptionId, keys);
      const key = keyOf(delivery);
      // After every key not listed before it (not newer).
      const at = partition(keys, (k) => !listedBefore(k, key));
      if (at === keys.length) keys.push(key);
      else keys.splice(at, 0, key);
    }
    byId.set(delivery.id, entry);
  };

  const forget = (subscriptionId: string): void => {
    for (const key of bySubscription.get(subscriptionId) ?? []) {
      countReplay(byId.get(key.id)?.delivery, -1);
      byId.delete(key.id);
    }
    bySubscription.delete(subscriptionId);
    waitingBy.delete(subscriptionId);
    applied.delete(subscriptionId);
  };

  /** Whether a restart or the log still needs the delivery in the index: waiting, or of an event the fan-out checkpoint has not passed. */
  const kept = (delivery: Delivery): boolean => delivery.status === 'waiting' || delivery.eventPosition > checkpoint.fannedOutThrough;

  const pending = async (): Promise<PendingDeliveries> => ({
    deliveries: [...byId.values()].filter(({ delivery }) => kept(delivery)),
    fannedOutThrough: checkpoint.fannedOutThrough,
  });

  return {
    async page(query) {
      const keys = bySubscription.get(query.subscriptionId) ?? [];
      const items: Delivery[] = [];
      // Newest first: from the end, or from the last key older than the cursor.
      let i = (query.after === undefined ? keys.length : olderThan(keys, query.after)) - 1;
      for (; i >= 0 && items.length <= query.limit; i--) {
        const { delivery } = byId.get((keys[i] as HistoryKey).id) as IndexedDelivery;
        if (query.createdBefore !== undefined && delivery.createdAt >= query.createdBefore) continue;
        if (query.createdFrom !== undefined && delivery.createdAt < query.createdFrom) break;
        if ((query.status ?? delivery.status) !== delivery.status || (query.eventType ?? delivery.eventType) !== delivery.eventType) continue;
        items.push(delivery);
      }
      const page = items.slice(0, query.limit);
      const last = page.at(-1);
      return { items: page, next: items.length > query.limit && last !== undefined ? keyOf(last) : null };
    },
    async get(subscriptionId, deliveryId) {
      const entry = byId.get(deliveryId);
      return entry?.delivery.subscriptionId === subscriptionId ? { delivery: entry.delivery, position: checkpoint.position } : undefined;
    },
    async has(keys) {
      return keys.map(({ subscriptionId, deliveryId }) => byId.get(deliveryId)?.delivery.subscriptionId === subscriptionId);
    },
    async waitingOf(subscriptionId) {
      const last = applied.get(subscriptionId);
      if (last === undefined) return NOTHING_APPLIED;
      const deliveries = [...(waitingBy.get(subscriptionId) ?? [])].map((id) => (byId.get(id) as IndexedDelivery).delivery);
      return { deliveries, workspaceId: last.workspaceId, revision: last.revision, position: last.position };
    },
    async appliedOf(subscriptionId) {
      return { revision: applied.get(subscriptionId)?.revision ?? -1, waiting: waitingBy.get(subscriptionId)?.size ?? 0 };
    },
    async replayFirsts(subscriptionId, replayId) {
      const ids = [...(firstsBy.get(replayKey(subscriptionId, replayId)) ?? [])];
      return { deliveries: ids.map((id) => (byId.get(id) as IndexedDelivery).delivery), position: checkpoint.position };
    },
    async replayOutcomes(subscriptionId, replayId) {
      return { ...(byReplay.get(replayKey(subscriptionId, replayId)) ?? noDeliveries()) };
    },
    async checkpoint() {
      return checkpoint;
    },
    apply(event) {
      if (event.position <= checkpoint.position) return;
      const change = indexChange(event, (id) => byId.get(id)?.delivery);
      let { fannedOutThrough } = checkpoint;
      if (change.kind === 'subscription_deleted') forget(change.subscriptionId);
      else {
        change.deliveries.forEach(put);
        if (change.applied !== null) applied.set(change.applied.subscriptionId, change.applied);
        fannedOutThrough = Math.max(fannedOutThrough, change.fannedOutThrough);
      }
      checkpoint = { position: event.position, fannedOutThrough };
    },
    pending,
    // In memory already: given as one page.
    async pendingPages() {
      const { deliveries, fannedOutThrough } = await pending();
      return {
        deliveries: (async function* () {
          yield* deliveries;
        })(),
        fannedOutThrough,
      };
    },
    async prune(before, limit) {
      let pruned = 0;
      for (const [subscriptionId, keys] of bySubscription) {
        if (pruned === limit) break;
        // The old ones are at the front: walk them, keep those still needed, cut the rest in one go.
        const stay: HistoryKey[] = [];
        let walked = 0;
        for (; walked < keys.length && pruned < limit; walked++) {
          const key = keys[walked] as HistoryKey;
          if (key.createdAt >= before) break;
          const { delivery } = byId.get(key.id) as IndexedDelivery;
          if (kept(delivery)) stay.push(key);
          else {
            countReplay(delivery, -1);
            byId.delete(key.id);
            pruned++;
          }
        }
        if (stay.length === walked) continue;
        const left = stay.concat(keys.slice(walked));
        if (left.length === 0) bySubscription.delete(subscriptionId);
        else bySubscription.set(subscriptionId, left);
      }
      return pruned;
    },
    forget: async (subscriptionId) => forget(subscriptionId),
    async clear() {
      byId.clear();
      bySubscription.clear();
      byReplay.clear();
      firstsBy.clear();
      waitingBy.clear();
      applied.clear();
      checkpoint = { position: 0, fannedOutThrough: 0 };
    },
    async close() {},
  };
};
