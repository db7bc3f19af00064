// What a request hands down to the commands it issues: its idempotency claim (request-claim.ts), if
// it carries a key, and whether it has written anything yet. The command handler marks `wrote` at
// each append it makes for the request: a failure after a write must not be answered as one that
// changed nothing (a 503 says "nothing was written, retry"). The errors middleware makes one per
// request (ctx.state.scope) and the idempotency middleware adds the claim; routes pass it on.
// AsyncLocalStorage carried both before: its promise hooks ran at every promise of the process, and
// a POST /api/v1/tickets took about 9% more CPU with them (the median of seven alternating pairs of
// runs at 64 connections).
import type { RequestClaim } from './request-claim.js';

export interface RequestScope {
  claim?: RequestClaim;
  wrote: boolean;
}

/** The scope of work no request asked for (start-up, background jobs): no claim, writes unnoted. */
export const noRequest: RequestScope | undefined = undefined;
