// Waiting for work that may hang (a client retrying a server that is away) only so long.

/** Whether `work` succeeds within `ms`; past that the caller goes on and the work is left to finish or fail alone. */
export const succeedsWithin = (work: Promise<unknown>, ms: number): Promise<boolean> =>
  Promise.race([
    work.then(
      () => true,
      () => false,
    ),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(false), ms).unref()),
  ]);
