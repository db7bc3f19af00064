// A bounded map for in-process caches: when full, the entry added first goes (a hot entry evicted is
// just read again). Insertion order is kept in a ring, so evicting never walks the map, whose
// deleted slots would make that slow.
export interface FifoCache<V> {
  get(key: string): V | undefined;
  set(key: string, value: V): void;
  delete(key: string): void;
  clear(): void;
}

export const createFifoCache = <V>(capacity: number): FifoCache<V> => {
  const entries = new Map<string, V>();
  const order = new Array<string | undefined>(capacity);
  let oldest = 0;
  return {
    get: (key) => entries.get(key),
    set(key, value) {
      if (!entries.has(key)) {
        const evicted = order[oldest];
        if (evicted !== undefined) entries.delete(evicted);
        order[oldest] = key;
        oldest = (oldest + 1) % capacity;
      }
      entries.set(key, value);
    },
    delete: (key) => void entries.delete(key),
    clear() {
      entries.clear();
      order.fill(undefined);
      oldest = 0;
    },
  };
};
