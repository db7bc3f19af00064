// The embedded RetrySchedule: a heap of due attempts per subscription and a heap of subscriptions by
// their earliest due attempt. Removal and moves are lazy: a heap item whose version is no longer the
// delivery's current one is skipped when it surfaces. There are no claims: the one dispatcher that
// takes an entry holds the delivery itself until it is settled, so an offer after the take adds it again.
import type { DueAttempt, RetrySchedule } from '../retry-schedule.js';
import { createHeap, type Heap } from './heap.js';

interface Item {
  readonly entry: DueAttempt;
  readonly version: number;
}

interface Lane {
  readonly heap: Heap<Item>;
  /** The key under which this lane sits in the index, or null when it is not indexed. */
  indexedAt: number | null;
}

export const createMemoryRetrySchedule = (): RetrySchedule => {
  const current = new Map<string, { readonly version: number; readonly round: number }>(); // deliveryId → its live item
  const lanes = new Map<string, Lane>();
  const index = createHeap<{ readonly subscriptionId: string; readonly dueAt: number }>((a, b) => a.dueAt < b.dueAt);
  let versions = 0;

  const live = (item: Item): boolean => current.get(item.entry.deliveryId)?.version === item.version;

  /** The lane's earliest live item, dropping stale ones on the way. */
  const head = (lane: Lane): Item | undefined => {
    let top = lane.heap.peek();
    while (top !== undefined && !live(top)) {
      lane.heap.pop();
      top = lane.heap.peek();
    }
    return top;
  };

  const reindex = (subscriptionId: string, lane: Lane): void => {
    const top = head(lane);
    if (top === undefined) {
      lanes.delete(subscriptionId);
      return;
    }
    if (lane.indexedAt !== null && lane.indexedAt <= top.entry.dueAt) return;
    lane.indexedAt = top.entry.dueAt;
    index.push({ subscriptionId, dueAt: top.entry.dueAt });
  };

  /** The index's earliest live lane entry, dropping stale ones on the way. */
  const firstLane = (): { subscriptionId: string; dueAt: number; lane: Lane } | undefined => {
    for (let top = index.peek(); top !== undefined; top = index.peek()) {
      const lane = lanes.get(top.subscriptionId);
      if (lane !== undefined && lane.indexedAt === top.dueAt) {
        const first = head(lane);
        if (first !== undefined && first.entry.dueAt === top.dueAt) return { ...top, lane };
        // The lane's head moved later (its earliest item was removed): index it again under its new key.
        index.pop();
        lane.indexedAt = null;
        reindex(top.subscriptionId, lane);
        continue;
      }
      index.pop();
    }
    return undefined;
  };

  const put = (entry: DueAttempt): void => {
    const version = ++versions;
    current.set(entry.deliveryId, { version, round: entry.round });
    let lane = lanes.get(entry.subscriptionId);
    if (lane === undefined) {
      lane = { heap: createHeap<Item>((a, b) => a.entry.dueAt < b.entry.dueAt || (a.entry.dueAt === b.entry.dueAt && a.version < b.version)), indexedAt: null };
      lanes.set(entry.subscriptionId, lane);
    }
    lane.heap.push({ entry, version });
    reindex(entry.subscriptionId, lane);
  };

  return {
    put: async (entry) => put(entry),
    offer: async (entry) => {
      if ((current.get(entry.deliveryId)?.round ?? 0) < entry.round) put(entry);
    },
    remove: async (deliveryId, round) => {
      if (round !== undefined && (current.get(deliveryId)?.round ?? 0) > round) return;
      current.delete(deliveryId);
    },
    takeDue: async (now, limit, room) => {
      const taken: DueAttempt[] = [];
      const visited: string[] = [];
      while (taken.length < limit) {
        const first = firstLane();
        if (first === undefined || first.dueAt > now) break;
        index.pop();
        first.lane.indexedAt = null;
        visited.push(first.subscriptionId);
        for (let left = room(first.subscriptionId); left > 0 && taken.length < limit; left--) {
          const top = head(first.lane);
          if (top === undefined || top.entry.dueAt > now) break;
          first.lane.heap.pop();
          current.delete(top.entry.deliveryId);
          taken.push(top.entry);
        }
      }
      // Lanes skipped for lack of room go back into the index only now, so each is visited once.
      for (const subscriptionId of visited) {
        const lane = lanes.get(subscriptionId);
        if (lane !== undefined) reindex(subscriptionId, lane);
      }
      return taken;
    },
    nextDueAt: async () => firstLane()?.dueAt ?? null,
    size: async () => current.size,
  };
};
