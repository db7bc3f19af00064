// The Idempotency-Key decisions, without I/O: who may take an abandoned claim over, whose answer
// counts, and which claim a request released for nothing is resumed under.
import { expect } from 'chai';
import { idempotencyKeyAggregate, verdictOf, type KeyCommand, type KeyState } from '../../src/domain/idempotency/idempotency.js';

const { decide, evolve, initial } = idempotencyKeyAggregate;

const apply = (state: KeyState, command: KeyCommand) => {
  const decision = decide(command, state);
  if (decision._tag === 'Left') return { state, events: 0, error: decision.left.code };
  return { state: decision.right.reduce(evolve, state), events: decision.right.length, error: null };
};

const claim = (claimId: string, nowMs: number, takeover: { claimId: string; leaseUntilMs: number } | null = null, fingerprint = 'f'): KeyCommand => ({
  kind: 'claim',
  claimId,
  fingerprint,
  nowMs,
  leaseMs: 100,
  holder: 'host:1:a',
  takeover,
});

describe('idempotency keys', () => {
  const held = apply(initial, claim('c1', 1_000)).state;

  it('refuses a second claim while the first runs, and a takeover of a claim that is no longer the key\'s', () => {
    expect(apply(held, claim('c2', 1_050)).error).to.equal('CONFLICT');
    expect(apply(held, claim('c2', 1_050, { claimId: 'c1', leaseUntilMs: 999 })).error).to.equal('CONFLICT');
    expect(apply(held, claim('c2', 1_200)).error).to.equal('CONFLICT');
  });

  it('lets one of two retries take an abandoned claim over, under the claim\'s own id', () => {
    const seen = { claimId: 'c1', leaseUntilMs: 1_100 };
    expect(verdictOf(held, 'f', 1_200)).to.deep.equal({ kind: 'expired', claim: seen });
    const resumed = apply(held, claim('c1', 1_200, seen));
    expect(resumed.error).to.equal(null);
    expect(resumed.state).to.deep.include({ kind: 'claimed', claimId: 'c1', leaseUntilMs: 1_300 });
    // The other retry saw the same abandoned claim: it is now someone else's.
    expect(apply(resumed.state, claim('c1', 1_200, seen)).error).to.equal('CONFLICT');
  });

  it('ignores the answer and the release of a run whose claim was taken over', () => {
    const resumed = apply(held, claim('c1', 1_200, { claimId: 'c1', leaseUntilMs: 1_100 })).state;
    const answer = { status: 500, body: null };
    expect(apply(resumed, { kind: 'answer', claim: { claimId: 'c1', leaseUntilMs: 1_100 }, answer, nowMs: 1_250 }).events).to.equal(0);
    expect(apply(resumed, { kind: 'release', claim: { claimId: 'c1', leaseUntilMs: 1_100 } }).events).to.equal(0);
    const answered = apply(resumed, { kind: 'answer', claim: { claimId: 'c1', leaseUntilMs: 1_300 }, answer: { status: 201, body: { id: 'x' } }, nowMs: 1_250 });
    expect(answered.state).to.deep.include({ kind: 'answered', answer: { status: 201, body: { id: 'x' } } });
  });

  it('resumes the same request under the claim it released, and a different one under a new claim', () => {
    const released = apply(held, { kind: 'release', claim: { claimId: 'c1', leaseUntilMs: 1_100 } }).state;
    expect(verdictOf(released, 'f', 1_050)).to.deep.equal({ kind: 'run', resume: 'c1' });
    expect(verdictOf(released, 'other', 1_050)).to.deep.equal({ kind: 'run', resume: null });
  });
});
