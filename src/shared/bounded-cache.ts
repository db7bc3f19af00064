// A bounded map for in-process caches. When full, a new key takes the slot of an entry that was not
// read (nor set again) since the clock hand last passed it: the hand clears the mark of each entry
// used meanwhile and moves on (CLOCK, "second chance"). Entries in use stay however long ago they
// were added; under first-in first-out eviction a state cache dropped the busiest tickets' folded
// states together every few minutes, since the tickets opened meanwhile had pushed them out. Slots
// sit in a ring, so evicting never walks the map, whose deleted slots would make that slow.
export interface BoundedCache<V> {
  /** The value, marking the entry used. */
  get(key: string): V | undefined;
  /** A kept key is updated and marked used; a new one takes a slot. */
  set(key: string, value: V): void;
  delete(key: string): void;
  clear(): void;
}

interface Entry<V> {
  value: V;
  readonly slot: number;
  used: boolean;
}

export const createBoundedCache = <V>(capacity: number): BoundedCache<V> => {
  const entries = new Map<string, Entry<V>>();
  const slots = new Array<string | undefined>(capacity);
  let hand = 0;
  // Slots below it were taken since the last clear: a clear empties those only (a log connection
  // clears its revisions at every batch after another connection's commit: the whole ring of 65,536
  // slots took 124 µs).
  let taken = 0;

  /** The slot a new key takes: at most two turns of the hand, the first clearing every mark. */
  const freeSlot = (): number => {
    for (;;) {
      const at = hand;
      hand = (hand + 1) % capacity;
      const key = slots[at];
      const entry = key === undefined ? undefined : entries.get(key);
      // Empty, or the key was deleted (and maybe set again elsewhere since).
      if (entry === undefined || entry.slot !== at) return at;
      if (!entry.used) {
        entries.delete(key as string);
        return at;
      }
      entry.used = false;
    }
  };

  return {
    get(key) {
      const entry = entries.get(key);
      if (entry === undefined) return undefined;
      entry.used = true;
      return entry.value;
    },
    set(key, value) {
      const entry = entries.get(key);
      if (entry !== undefined) {
        entry.value = value;
        entry.used = true;
        return;
      }
      const slot = freeSlot();
      slots[slot] = key;
      taken = Math.max(taken, slot + 1);
      entries.set(key, { value, slot, used: false });
    },
    delete: (key) => void entries.delete(key),
    clear() {
      entries.clear();
      slots.fill(undefined, 0, taken);
      taken = 0;
      hand = 0;
    },
  };
};
