// Runs tasks one at a time per key within this process (other keys run freely).
export const createKeyedLock = () => {
  const tails = new Map<string, Promise<unknown>>();
  return async <T>(key: string, task: () => Promise<T>): Promise<T> => {
    const previous = tails.get(key) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.catch(() => undefined);
    tails.set(key, tail);
    void tail.then(() => {
      if (tails.get(key) === tail) tails.delete(key);
    });
    return result;
  };
};

/** Holds every key of `keys` while `task` runs; keys are taken in sorted order, so callers cannot deadlock. */
export const lockAll = async <T>(lock: ReturnType<typeof createKeyedLock>, keys: readonly string[], task: () => Promise<T>): Promise<T> =>
  [...new Set(keys)].sort().reduceRight<() => Promise<T>>((inner, key) => () => lock(key, inner), task)();
