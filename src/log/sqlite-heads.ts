// What a connection knows of the log's heads (each stream's last revision, each workspace's last
// offset), so that an append need not look them up in the file. A batch stages what its writes set;
// its commit makes that known, its rollback drops it. What is known holds only while this connection
// is the file's only writer: each batch, under the write lock, hands `check` the file's
// PRAGMA data_version (changed by the commits of other connections, never by this one's), and
// whatever another connection may have changed since the last batch is forgotten and read again.

export interface Heads<V> {
  /** The value as the open batch has it: staged by it, known, or read from the file (and known from then on). */
  get(key: string): V;
  /** A value this batch wrote; known once the batch commits. */
  stage(key: string, value: V): void;
  /** What this batch staged, to persist it before the commit. */
  readonly staged: ReadonlyMap<string, V>;
  /** Called once the batch committed. */
  commit(): void;
  /** Called once the batch rolled back: nothing it staged was written. */
  rollback(): void;
  /** Called at the start of each batch, under the write lock, with the file's data version. */
  check(dataVersion: number): void;
}

/**
 * `read` gives a key's committed value from the file; at most `limit` keys are known (the least
 * recently written are dropped first, and read again when asked for).
 */
export const knownHeads = <V>(read: (key: string) => V, limit: number): Heads<V> => {
  let known = new Map<string, V>();
  let staged = new Map<string, V>();
  let version: number | undefined;
  const remember = (key: string, value: V): void => {
    // Deleted first so the key moves to the end of the Map's order: the first keys are the oldest.
    known.delete(key);
    known.set(key, value);
    if (known.size > limit) known.delete(known.keys().next().value as string);
  };
  return {
    get: (key) => {
      if (staged.has(key)) return staged.get(key) as V;
      if (known.has(key)) return known.get(key) as V;
      // Not staged, so this batch has not written it: the file holds the committed value.
      const value = read(key);
      remember(key, value);
      return value;
    },
    stage: (key, value) => void staged.set(key, value),
    get staged() {
      return staged;
    },
    commit: () => {
      staged.forEach((value, key) => remember(key, value));
      staged = new Map();
    },
    rollback: () => {
      staged = new Map();
    },
    check: (dataVersion) => {
      if (dataVersion !== version) known = new Map();
      version = dataVersion;
    },
  };
};
