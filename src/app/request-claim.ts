// The idempotency claim a request runs under, for everything it appends: the command handler marks
// each event it appends for that request with the claim, in the same append as the command's events,
// so a claim whose answer was lost in a crash can still tell whether its request wrote anything.
// Carried by AsyncLocalStorage because commands are issued deep inside routes.
import { AsyncLocalStorage } from 'node:async_hooks';

const current = new AsyncLocalStorage<string>();

/** Runs `work` with `claimId` as the claim of every command it issues. */
export const runUnderClaim = <T>(claimId: string, work: () => Promise<T>): Promise<T> => current.run(claimId, work);

/** The claim of the request this code runs for, if it carries an idempotency key. */
export const currentClaim = (): string | undefined => current.getStore();
