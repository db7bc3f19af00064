// The idempotency claim a request runs under, for everything it appends and every id it mints.
// - Each command's events carry the claim and the command's step on its stream (the n-th command of
//   the request on that stream), in the same append, so a claim whose answer a crash lost can tell
//   what its request wrote.
// - Resource ids are derived from the claim, the kind of resource and its count in the request,
//   so running the request again under the same claim mints the same ids whichever path it takes.
// Together they let a request interrupted between two appends be resumed: run again under its claim,
// each command whose events the stream already holds answers those events, the rest are carried out.
// A request's commands get it with its scope (request-scope.ts).
import { createHash } from 'node:crypto';

export interface RequestClaim {
  readonly id: string;
  /** Run again after an interrupted run: commands first look for what that run appended. */
  readonly resumed: boolean;
  /** The next step of each stream's commands, and the next count of each id kind. */
  readonly steps: Map<string, number>;
  readonly minted: Map<string, number>;
}

/** The claim `id`, for a request's first run or (`resumed`) a run after an interrupted one. */
export const newClaim = (id: string, resumed: boolean): RequestClaim => ({ id, resumed, steps: new Map(), minted: new Map() });

const countOf = (counts: Map<string, number>, name: string): number => {
  const n = counts.get(name) ?? 0;
  counts.set(name, n + 1);
  return n;
};

/** The step of the next command on `stream` in this request. */
export const nextStep = (claim: RequestClaim, stream: string): number => countOf(claim.steps, stream);

/**
 * A new id for a resource of `kind`: under a claim, derived from it (the same on every run of the
 * request); otherwise from `random`. 32 hex characters either way.
 */
export const resourceId = (kind: string, random: () => string, claim: RequestClaim | undefined): string => {
  if (claim === undefined) return random();
  const n = countOf(claim.minted, kind);
  return createHash('sha256').update(`${claim.id}\0${kind}\0${n}`).digest('hex').slice(0, 32);
};
