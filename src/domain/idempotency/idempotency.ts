// Idempotency keys of POST requests (as Stripe and Svix have them): stream
// `idempotency-<scope>-<key hash>` records who claimed the key for which request (its fingerprint:
// method, path and body), and the answer that request got. The same key with the same request within
// the retention answers the recorded answer again; with another request it is refused; while the
// first is still running the retry is told so. Internal events only.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../../app/command-handler.js';
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
}

export type KeyState =
  | { readonly kind: 'free' }
  | { readonly kind: 'claimed'; readonly claimId: string; readonly fingerprint: string; readonly leaseUntilMs: number }
  | { readonly kind: 'answered'; readonly claimId: string; readonly fingerprint: string; readonly answer: RecordedAnswer; readonly atMs: number };

export type KeyCommand =
  /** `takeover`: the caller made sure the expired claim's request wrote nothing, so it may run again. */
  | { readonly kind: 'claim'; readonly claimId: string; readonly fingerprint: string; readonly nowMs: number; readonly leaseMs: number; readonly takeover: boolean }
  | { readonly kind: 'answer'; readonly claimId: string; readonly answer: RecordedAnswer; readonly nowMs: number }
  | { readonly kind: 'release'; readonly claimId: string };

const free: KeyState = { kind: 'free' };

const evolve: Aggregate<KeyState, KeyCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case IDEMPOTENCY_EVENTS.claimed:
      return { kind: 'claimed', claimId: String(data['claim_id']), fingerprint: String(data['fingerprint']), leaseUntilMs: Number(data['lease_until_ms']) };
    case IDEMPOTENCY_EVENTS.answered:
      return state.kind === 'free'
        ? state
        : {
            kind: 'answered',
            claimId: state.claimId,
            fingerprint: state.fingerprint,
            answer: { status: Number(data['status']), body: (data['body'] ?? null) as Json },
            atMs: Number(data['at_ms']),
          };
    case IDEMPOTENCY_EVENTS.released:
      return free;
    default:
      return state;
  }
};

/** What a request carrying the key meets, before anything is appended. */
export type Verdict =
  | { readonly kind: 'run' }
  | { readonly kind: 'replay'; readonly answer: RecordedAnswer }
  | { readonly kind: 'reused' }
  | { readonly kind: 'in_progress' }
  /** The claim's lease ran out without an answer: whether its request wrote anything decides. */
  | { readonly kind: 'expired'; readonly claimId: string };

export const verdictOf = (state: KeyState, fingerprint: string, nowMs: number): Verdict => {
  switch (state.kind) {
    case 'free':
      return { kind: 'run' };
    case 'answered':
      if (nowMs - state.atMs > IDEMPOTENCY_RETENTION_MS) return { kind: 'run' };
      return state.fingerprint === fingerprint ? { kind: 'replay', answer: state.answer } : { kind: 'reused' };
    case 'claimed':
      if (state.fingerprint !== fingerprint) return { kind: 'reused' };
      return nowMs < state.leaseUntilMs ? { kind: 'in_progress' } : { kind: 'expired', claimId: state.claimId };
  }
};

const reused = () =>
  domainError('IDEMPOTENCY_KEY_REUSED', 'This Idempotency-Key was used for another request (another method, path or body): use a new key for a new request');
const inProgress = () => domainError('CONFLICT', 'A request with this Idempotency-Key is still running: retry shortly', { reason: 'idempotency_key_in_use' });

const decide: Aggregate<KeyState, KeyCommand>['decide'] = (command, state) => {
  switch (command.kind) {
    case 'claim': {
      const verdict = verdictOf(state, command.fingerprint, command.nowMs);
      if (verdict.kind === 'reused') return left(reused());
      if (verdict.kind === 'in_progress' || (verdict.kind === 'expired' && !command.takeover)) return left(inProgress());
      // A replay appends nothing: the caller answers from the state.
      if (verdict.kind === 'replay') return right([]);
      return right([
        { type: IDEMPOTENCY_EVENTS.claimed, data: { claim_id: command.claimId, fingerprint: command.fingerprint, lease_until_ms: command.nowMs + command.leaseMs } },
      ]);
    }
    case 'answer':
      // A claim taken over meanwhile keeps its own answer.
      if (state.kind !== 'claimed' || state.claimId !== command.claimId) return right([]);
      return right([{ type: IDEMPOTENCY_EVENTS.answered, data: { status: command.answer.status, body: command.answer.body, at_ms: command.nowMs } }]);
    case 'release':
      if (state.kind !== 'claimed' || state.claimId !== command.claimId) return right([]);
      return right([{ type: IDEMPOTENCY_EVENTS.released, data: { claim_id: command.claimId } }]);
  }
};

export const idempotencyKeyAggregate: Aggregate<KeyState, KeyCommand> = { initial: free, evolve, decide };

/** The metadata field that ties the events a request appended to the claim it ran under. */
export const CLAIM_METADATA = 'idempotency_claim';
