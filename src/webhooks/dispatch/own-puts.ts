// The deliveries a dispatcher put in a schedule it shares with others, as it left them, until it claims
// them back: a claim of its own untouched put (DueAttempt.ownPut) is attempted from here, without
// reading the delivery, its subscription's directory position or its body from the log. Bounded: the
// oldest go first, and so does what another dispatcher claimed (it never comes back to this one); an
// attempt that misses reads the log, as any take-over does. It holds no secret and no signature: an
// attempt signs with the secrets the directory has when it is sent.
// The bound is the ring of shared/bounded-cache.ts: kept entries are never read before their take, so
// its hand evicts them oldest first. A Map dropping its first key instead walked the deleted slots
// before it, about 10 µs a put once 10,000 were kept (a dispatcher behind a burst).
import { createBoundedCache } from '../../shared/bounded-cache.js';

export interface OwnPuts<T> {
  /** Keeps `value` as the delivery's state when it was put, replacing what was kept before. */
  keep(deliveryId: string, value: T): void;
  /** What was kept of the delivery, which is dropped: a claim uses it once. */
  take(deliveryId: string): T | undefined;
}

export const createOwnPuts = <T>(limit: number): OwnPuts<T> => {
  const kept = createBoundedCache<T>(limit);
  return {
    keep: (deliveryId, value) => kept.set(deliveryId, value),
    take(deliveryId) {
      const value = kept.get(deliveryId);
      kept.delete(deliveryId);
      return value;
    },
  };
};
