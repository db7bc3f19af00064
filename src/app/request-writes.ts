// Whether the request this code runs for has written anything yet: the command handler notes each
// append it makes for a request. A failure after a write must not be answered as one that changed
// nothing (a 503 says "nothing was written, retry"). Carried by AsyncLocalStorage because commands
// are issued deep inside routes.
import { AsyncLocalStorage } from 'node:async_hooks';

export interface RequestWrites {
  wrote: boolean;
}

const current = new AsyncLocalStorage<RequestWrites>();

/** Runs `work` noting its writes in `writes`. */
export const recordingWrites = <T>(writes: RequestWrites, work: () => Promise<T>): Promise<T> => current.run(writes, work);

/** The writes record of the request this code runs for, if any: the command handler marks it. */
export const requestWrites = (): RequestWrites | undefined => current.getStore();
