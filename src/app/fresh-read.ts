// A read of "what the log holds now", shared fairly: a caller gets the result of a read that started
// after its call, so it covers anything committed before the call (by any process). Callers arriving
// while a read is under way share the next one, so a busy server reads once per round trip rather
// than once per request.
export type FreshRead<T> = () => Promise<T>;

export const createFreshRead = <T>(read: () => Promise<T>): FreshRead<T> => {
  let running: Promise<T> | null = null;
  let next: Promise<T> | null = null;

  const start = (): Promise<T> => {
    const current = read().finally(() => {
      running = null;
    });
    running = current;
    return current;
  };

  return () => {
    if (running === null) return start();
    // The read under way may have started before this call: wait for the one after it.
    const after = () => {
      next = null;
      return start();
    };
    next ??= running.then(after, after);
    return next;
  };
};
