// Idempotency keys of POST requests (as Stripe and Svix have them): stream
// `idempotency-<scope>-<key hash>` records who claimed the key for which request (its fingerprint:
// method, path and body), and the answer that request got. The same key with the same request within
// the retention answers the recorded answer again; with another request it is refused; while the
// first is still running the retry is told so. Internal events only.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import type { Json } from '../../log/event-log.js';
import { domainError } from '../errors.js';

export const IDEMPOTENCY_EVENTS = {
  claimed: 'idempotency.claimed',
  answered: 'idempotency.answered',
  released: 'idempotency.released',
} as const;

/** A recorded answer is given again for this long after it was given first. */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;

export interface RecordedAnswer {
  readonly status: number;
  readonly body: Json;
  /**
   * The body held a secret (a webhook secret, an API key), so the log has it only sealed, here, and
   * `body` is null: a replay opens it and answers it as it was.
   */
  readonly sealed?: string;
}

export type KeyState =
  /**
   * `released`: the claim released last and its request's fingerprint. Its run answered that it
   * changed nothing, yet a request that appends to several streams may have appended to some: the
   * same request sent again resumes under that claim.
   */
  | { readonly kind: 'free'; readonly released: { readonly claimId: string; readonly fingerprint: string } | null }
  /** `holder`: the process running the claim's request (see app/holder.ts). */
  | { readonly kind: 'claimed'; readonly claimId: string; readonly fingerprint: string; readonly leaseUntilMs: number; readonly holder: string }
  | { readonly kind: 'answered'; readonly claimId: string; readonly fingerprint: string; readonly answer: RecordedAnswer; readonly atMs: number };

/**
 * One claim of the key, as a run holds it. The id alone does not name it: a resumed request claims
 * the key again under the id of the run it resumes, with a lease of its own.
 */
export interface ClaimRef {
  readonly claimId: string;
  readonly leaseUntilMs: number;
}

export type KeyCommand =
  /**
   * `takeover`: the claim the caller found abandoned, which this claim replaces (only if it is still
   * the key's claim: of two retries taking the same claim over, one wins). `claimId` may be the
   * abandoned claim's own id: the request is then resumed under it.
   */
  | {
      readonly kind: 'claim';
      readonly claimId: string;
      readonly fingerprint: string;
      readonly nowMs: number;
      readonly leaseMs: number;
      readonly holder: string;
      readonly takeover: ClaimRef | null;
    }
  /** Answer and release act only while `claim` is still the key's claim: a run taken over has no say. */
  | { readonly kind: 'answer'; readonly claim: ClaimRef; readonly answer: RecordedAnswer; readonly nowMs: number }
  | { readonly kind: 'release'; readonly claim: ClaimRef };

const free: KeyState = { kind: 'free', released: null };

const evolve: Aggregate<KeyState, KeyCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case IDEMPOTENCY_EVENTS.claimed:
      return {
        kind: 'claimed',
        claimId: String(data['claim_id']),
        fingerprint: String(data['fingerprint']),
        leaseUntilMs: Number(data['lease_until_ms']),
        holder: String(data['holder'] ?? ''),
      };
    case IDEMPOTENCY_EVENTS.answered:
      return state.kind === 'free'
        ? state
        : {
            kind: 'answered',
            claimId: state.claimId,
            fingerprint: state.fingerprint,
            answer: { status: Number(data['status']), body: (data['body'] ?? null) as Json, ...(typeof data['sealed'] === 'string' ? { sealed: data['sealed'] } : {}) },
            atMs: Number(data['at_ms']),
          };
    case IDEMPOTENCY_EVENTS.released:
      return state.kind === 'claimed' ? { kind: 'free', released: { claimId: state.claimId, fingerprint: state.fingerprint } } : free;
    default:
      return state;
  }
};

/** What a request carrying the key meets, before anything is appended. */
export type Verdict =
  /** `resume`: the claim a run of the same request released, to run under again. */
  | { readonly kind: 'run'; readonly resume: string | null }
  | { readonly kind: 'replay'; readonly answer: RecordedAnswer }
  | { readonly kind: 'reused' }
  /** Another request holds the key; the caller may find its holder gone and take it over. */
  | { readonly kind: 'in_progress'; readonly claim: ClaimRef; readonly holder: string }
  /** The claim's lease ran out without an answer: the request is resumed, or run again. */
  | { readonly kind: 'expired'; readonly claim: ClaimRef };

export const verdictOf = (state: KeyState, fingerprint: string, nowMs: number): Verdict => {
  switch (state.kind) {
    case 'free':
      return { kind: 'run', resume: state.released?.fingerprint === fingerprint ? state.released.claimId : null };
    case 'answered':
      if (nowMs - state.atMs > IDEMPOTENCY_RETENTION_MS) return { kind: 'run', resume: null };
      return state.fingerprint === fingerprint ? { kind: 'replay', answer: state.answer } : { kind: 'reused' };
    case 'claimed':
      if (state.fingerprint !== fingerprint) return { kind: 'reused' };
      const claim = { claimId: state.claimId, leaseUntilMs: state.leaseUntilMs };
      return nowMs < state.leaseUntilMs ? { kind: 'in_progress', claim, holder: state.holder } : { kind: 'expired', claim };
  }
};

const holds = (state: KeyState, claim: ClaimRef): boolean =>
  state.kind === 'claimed' && state.claimId === claim.claimId && state.leaseUntilMs === claim.leaseUntilMs;

const reused = () =>
  domainError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for another request (another method, path or body): use a new key for a new request');
const inProgress = () => domainError('CONFLICT', 'A request with this Idempotency-Key is still running: retry shortly', { reason: 'idempotency_key_in_use' });

const decide: Aggregate<KeyState, KeyCommand>['decide'] = (command, state) => {
  switch (command.kind) {
    case 'claim': {
      const verdict = verdictOf(state, command.fingerprint, command.nowMs);
      if (verdict.kind === 'reused') return left(reused());
      if (verdict.kind === 'in_progress' || verdict.kind === 'expired') {
        if (command.takeover === null || !holds(state, command.takeover)) return left(inProgress());
      }
      // A replay appends nothing: the caller answers from the state.
      if (verdict.kind === 'replay') return right([]);
      return right([
        {
          type: IDEMPOTENCY_EVENTS.claimed,
          data: { claim_id: command.claimId, fingerprint: command.fingerprint, lease_until_ms: command.nowMs + command.leaseMs, holder: command.holder },
        },
      ]);
    }
    case 'answer':
      // A claim taken over meanwhile keeps its own answer.
      if (!holds(state, command.claim)) return right([]);
      return right([{ type: IDEMPOTENCY_EVENTS.answered, data: { ...command.answer, at_ms: command.nowMs } }]);
    case 'release':
      if (!holds(state, command.claim)) return right([]);
      return right([{ type: IDEMPOTENCY_EVENTS.released, data: { claim_id: command.claim.claimId } }]);
  }
};

export const idempotencyKeyAggregate: Aggregate<KeyState, KeyCommand> = { initial: free, evolve, decide };

/** The metadata field that ties the events a request appended to the claim it ran under. */
export const CLAIM_METADATA = 'idempotency_claim';
/** Which of the request's commands on that stream appended them (0 for its first). */
export const STEP_METADATA = 'idempotency_step';
