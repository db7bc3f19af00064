// The deliveries a dispatcher put in a schedule it shares with others, as it left them, until it claims
// them back: a claim of its own untouched put (DueAttempt.ownPut) is attempted from here, without
// reading the delivery, its subscription's directory position or its body from the log. Bounded: the
// oldest go first, and so does what another dispatcher claimed (it never comes back to this one); an
// attempt that misses reads the log, as any take-over does. It holds no secret and no signature: an
// attempt signs with the secrets the directory has when it is sent.

export interface OwnPuts<T> {
  /** Keeps `value` as the delivery's state when it was put, replacing what was kept before. */
  keep(deliveryId: string, value: T): void;
  /** What was kept of the delivery, which is dropped: a claim uses it once. */
  take(deliveryId: string): T | undefined;
}

export const createOwnPuts = <T>(limit: number): OwnPuts<T> => {
  // A Map iterates in insertion order: its first key is the oldest put.
  const kept = new Map<string, T>();
  return {
    keep(deliveryId, value) {
      kept.delete(deliveryId);
      kept.set(deliveryId, value);
      if (kept.size > limit) kept.delete(kept.keys().next().value as string);
    },
    take(deliveryId) {
      const value = kept.get(deliveryId);
      kept.delete(deliveryId);
      return value;
    },
  };
};
