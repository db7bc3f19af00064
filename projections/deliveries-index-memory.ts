// The delivery-history index in this process's memory, rebuilt from the log at start: for API
// servers of the distributed mode (each tails the log itself, as their memory read models do) and
// tests. Each subscription's deliveries are kept in listing order, so a page starts with a binary
// search; filters are applied while scanning from there (a page with a rare filter scans further).
import type { Delivery } from '../src/domain/delivery/delivery.js';
import { indexChange, keyOf, listedBefore, type DeliveryIndex, type HistoryKey, type IndexCheckpoint, type IndexedDelivery } from './deliveries-index.js';

/** The first index in `keys` (listing order) whose key is listed after `key`. */
const firstAfter = (keys: readonly HistoryKey[], key: HistoryKey): number => {
  let low = 0;
  let high = keys.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (listedBefore(key, keys[middle] as HistoryKey)) high = middle;
    else low = middle + 1;
  }
  return low;
};

export const createMemoryDeliveryIndex = (): DeliveryIndex => {
  const byId = new Map<string, IndexedDelivery>();
  /** Per subscription, its deliveries' keys in listing order (newest first). */
  const bySubscription = new Map<string, HistoryKey[]>();
  let checkpoint: IndexCheckpoint = { position: 0, fannedOutThrough: 0 };

  const remove = (delivery: Delivery): void => {
    byId.delete(delivery.id);
    const keys = bySubscription.get(delivery.subscriptionId);
    if (keys === undefined) return;
    keys.splice(firstAfter(keys, keyOf(delivery)) - 1, 1);
    if (keys.length === 0) bySubscription.delete(delivery.subscriptionId);
  };

  const put = (entry: IndexedDelivery): void => {
    const { delivery } = entry;
    if (!byId.has(delivery.id)) {
      const keys = bySubscription.get(delivery.subscriptionId) ?? [];
      bySubscription.set(delivery.subscriptionId, keys);
      const key = keyOf(delivery);
      keys.splice(firstAfter(keys, key), 0, key);
    }
    byId.set(delivery.id, entry);
  };

  const forget = (subscriptionId: string): void => {
    for (const key of bySubscription.get(subscriptionId) ?? []) byId.delete(key.id);
    bySubscription.delete(subscriptionId);
  };

  return {
    async page(query) {
      const keys = bySubscription.get(query.subscriptionId) ?? [];
      const items: Delivery[] = [];
      let i = query.after === undefined ? 0 : firstAfter(keys, query.after);
      for (; i < keys.length && items.length <= query.limit; i++) {
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
        fannedOutThrough = Math.max(fannedOutThrough, change.fannedOutThrough);
      }
      checkpoint = { position: event.position, fannedOutThrough };
    },
    async pending() {
      const deliveries = [...byId.values()].filter(({ delivery }) => delivery.status === 'waiting' || delivery.eventPosition > checkpoint.fannedOutThrough);
      return { deliveries, fannedOutThrough: checkpoint.fannedOutThrough };
    },
    async prune(before, limit) {
      const old = [...byId.values()]
        .filter(({ delivery }) => delivery.createdAt < before && delivery.status !== 'waiting' && delivery.eventPosition <= checkpoint.fannedOutThrough)
        .slice(0, limit);
      old.forEach(({ delivery }) => remove(delivery));
      return old.length;
    },
    forget: async (subscriptionId) => forget(subscriptionId),
    async clear() {
      byId.clear();
      bySubscription.clear();
      checkpoint = { position: 0, fannedOutThrough: 0 };
    },
    async close() {},
  };
};
