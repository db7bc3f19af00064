// The embedded RetrySchedule: two heaps of due attempts per subscription (its retries, its first
// attempts) and two heaps of subscriptions, by their earliest retry and by their earliest attempt of
// either kind. A take serves the subscriptions with a retry due first. Removal and moves are lazy: a
// heap item whose version is no longer the delivery's current one is skipped when it surfaces. There
// are no claims: the one dispatcher that takes an entry holds the delivery itself until it is
// settled, so an offer after the take adds it again.
import type { DueAttempt, RetrySchedule, SharedRoom } from '../retry-schedule.js';
import { createHeap, type Heap } from './heap.js';

interface Item {
  readonly entry: DueAttempt;
  readonly version: number;
}

interface Lane {
  readonly retries: Heap<Item>;
  readonly firsts: Heap<Item>;
}

/** Subscriptions by a due time of theirs, indexed lazily: an item whose key is no longer the lane's is dropped when it surfaces. */
interface LaneIndex {
  /** Indexes the lane under its current key, unless it already sits at that key or an earlier one. */
  reindex(subscriptionId: string, lane: Lane): void;
  /**
   * An item due at `dueAt` joined the lane: outside a take every lane with items sits at a key no
   * later than its earliest, so only an earlier item (or a lane not indexed yet) needs a new key.
   */
  joined(subscriptionId: string, dueAt: number): void;
  /** The earliest lane whose key is current, dropping or re-keying stale items on the way. */
  first(): { readonly subscriptionId: string; readonly dueAt: number; readonly lane: Lane } | undefined;
  /** Takes the lane `first` gave out of the index (until its next reindex). */
  pop(subscriptionId: string): void;
  forget(subscriptionId: string): void;
}

export const createMemoryRetrySchedule = (): RetrySchedule => {
  const current = new Map<string, { readonly version: number; readonly round: number }>(); // deliveryId → its live item
  const lanes = new Map<string, Lane>();
  let versions = 0;
  const earlier = (a: Item, b: Item): boolean => a.entry.dueAt < b.entry.dueAt || (a.entry.dueAt === b.entry.dueAt && a.version < b.version);

  const live = (item: Item): boolean => current.get(item.entry.deliveryId)?.version === item.version;

  /** The heap's earliest live item, dropping stale ones on the way. */
  const liveTop = (heap: Heap<Item>): Item | undefined => {
    let top = heap.peek();
    while (top !== undefined && !live(top)) {
      heap.pop();
      top = heap.peek();
    }
    return top;
  };

  /** The lane's earliest live item of either kind. */
  const head = (lane: Lane): Item | undefined => {
    const [retry, first] = [liveTop(lane.retries), liveTop(lane.firsts)];
    return retry === undefined || (first !== undefined && first.entry.dueAt < retry.entry.dueAt) ? first : retry;
  };

  /** The lane's heap to take from at `now`: its retries while one is due, else its first attempts while one is. */
  const dueHeap = (lane: Lane, now: number): Heap<Item> | undefined => {
    const retry = liveTop(lane.retries);
    if (retry !== undefined && retry.entry.dueAt <= now) return lane.retries;
    const first = liveTop(lane.firsts);
    return first !== undefined && first.entry.dueAt <= now ? lane.firsts : undefined;
  };

  const laneIndex = (earliest: (lane: Lane) => Item | undefined): LaneIndex => {
    const heap = createHeap<{ readonly subscriptionId: string; readonly dueAt: number }>((a, b) => a.dueAt < b.dueAt);
    const keys = new Map<string, number>(); // subscriptionId → the key its current item sits under
    const joined = (subscriptionId: string, dueAt: number): void => {
      const key = keys.get(subscriptionId);
      if (key !== undefined && key <= dueAt) return;
      keys.set(subscriptionId, dueAt);
      heap.push({ subscriptionId, dueAt });
    };
    const reindex = (subscriptionId: string, lane: Lane): void => {
      const top = earliest(lane);
      if (top === undefined) keys.delete(subscriptionId);
      else joined(subscriptionId, top.entry.dueAt);
    };
    return {
      reindex,
      joined,
      first() {
        for (let top = heap.peek(); top !== undefined; top = heap.peek()) {
          const lane = lanes.get(top.subscriptionId);
          if (lane !== undefined && keys.get(top.subscriptionId) === top.dueAt) {
            if (earliest(lane)?.entry.dueAt === top.dueAt) return { ...top, lane };
            // The lane's earliest moved later (it was removed or taken): index it again under its new key.
            heap.pop();
            keys.delete(top.subscriptionId);
            reindex(top.subscriptionId, lane);
            continue;
          }
          heap.pop();
        }
        return undefined;
      },
      pop(subscriptionId) {
        heap.pop();
        keys.delete(subscriptionId);
      },
      forget: (subscriptionId) => void keys.delete(subscriptionId),
    };
  };
  const byRetry = laneIndex((lane) => liveTop(lane.retries));
  const byHead = laneIndex(head);
  const nextDueAt = (): number | null => byHead.first()?.dueAt ?? null;

  const reindex = (subscriptionId: string, lane: Lane): void => {
    if (head(lane) === undefined) {
      lanes.delete(subscriptionId);
      byRetry.forget(subscriptionId);
      byHead.forget(subscriptionId);
      return;
    }
    byRetry.reindex(subscriptionId, lane);
    byHead.reindex(subscriptionId, lane);
  };

  const put = (entry: DueAttempt): void => {
    const version = ++versions;
    current.set(entry.deliveryId, { version, round: entry.round });
    let lane = lanes.get(entry.subscriptionId);
    if (lane === undefined) {
      lane = { retries: createHeap<Item>(earlier), firsts: createHeap<Item>(earlier) };
      lanes.set(entry.subscriptionId, lane);
    }
    (entry.retry === true ? lane.retries : lane.firsts).push({ entry, version });
    if (entry.retry === true) byRetry.joined(entry.subscriptionId, entry.dueAt);
    byHead.joined(entry.subscriptionId, entry.dueAt);
  };

  /**
   * One take's room: `take` moves up to the subscription's room of its lane's due entries (fewer
   * when its pool has less left, or `taken` reaches `limit`) into `taken`, charging the pool.
   */
  const takeRoom = (now: number, limit: number, room: (subscriptionId: string) => number, pools: SharedRoom | undefined, taken: DueAttempt[]) => {
    const left = new Map<string, number>();
    return (subscriptionId: string, lane: Lane): void => {
      const pool = pools?.of(subscriptionId);
      if (pool !== undefined && !left.has(pool)) left.set(pool, (pools as SharedRoom).room(pool));
      let n = Math.min(room(subscriptionId), pool === undefined ? Infinity : (left.get(pool) as number));
      for (; n > 0 && taken.length < limit; n--) {
        const item = dueHeap(lane, now)?.pop();
        if (item === undefined) break;
        current.delete(item.entry.deliveryId);
        taken.push(item.entry);
        if (pool !== undefined) left.set(pool, (left.get(pool) as number) - 1);
      }
    };
  };

  return {
    put: async (...entries) => entries.forEach(put),
    putAndTake: async (entries, now, limit, room, pools) => {
      entries.forEach(put);
      const taken: DueAttempt[] = [];
      const take = takeRoom(now, limit, room, pools, taken);
      for (const subscriptionId of new Set(entries.map((entry) => entry.subscriptionId))) {
        const lane = lanes.get(subscriptionId);
        if (lane === undefined || taken.length >= limit) continue;
        take(subscriptionId, lane);
        reindex(subscriptionId, lane);
      }
      return taken;
    },
    offer: async (...entries) => {
      for (const entry of entries) if ((current.get(entry.deliveryId)?.round ?? 0) < entry.round) put(entry);
    },
    remove: async (deliveryId, round) => {
      if (round !== undefined && (current.get(deliveryId)?.round ?? 0) > round) return;
      current.delete(deliveryId);
    },
    takeDue: async (now, limit, room, pools, look) => {
      const taken: DueAttempt[] = [];
      const take = takeRoom(now, limit, room, pools, taken);
      const visited = new Set<string>();
      // Subscriptions with a retry due first: when the room (a workspace's, say) is short, retries get it.
      for (const index of [byRetry, byHead]) {
        while (taken.length < limit) {
          const first = index.first();
          if (first === undefined || first.dueAt > now) break;
          index.pop(first.subscriptionId);
          if (visited.has(first.subscriptionId)) continue;
          visited.add(first.subscriptionId);
          take(first.subscriptionId, first.lane);
        }
      }
      // Lanes skipped for lack of room go back into the indexes only now, so each is visited once.
      for (const subscriptionId of visited) {
        const lane = lanes.get(subscriptionId);
        if (lane !== undefined) reindex(subscriptionId, lane);
      }
      look?.(nextDueAt());
      return taken;
    },
    nextDueAt: async () => nextDueAt(),
    size: async () => current.size,
  };
};
