// A wait that a stop request cuts short: resolves true after `ms`, false at once when `signal` aborts.
export const pause = (ms: number, signal: AbortSignal): Promise<boolean> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const done = (completed: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', aborted);
      resolve(completed);
    };
    const aborted = () => done(false);
    const timer = setTimeout(() => done(true), ms);
    signal.addEventListener('abort', aborted, { once: true });
  });

/** The next pause of a doubling backoff: `first`, then twice the last, at most `max`. */
export const doubled = (last: number | null, first: number, max: number): number => (last === null ? first : Math.min(last * 2, max));
