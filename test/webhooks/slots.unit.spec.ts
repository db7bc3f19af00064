// The slot decisions of WEBHOOK_MAX_SUBSCRIPTIONS, without I/O.
import { expect } from 'chai';
import { claimedBefore, SLOT_EVENTS, slotsAggregate, type SlotsCommand, type SlotsState } from '../../src/domain/subscription/slots.js';

const { decide, evolve, initial } = slotsAggregate;

const apply = (state: SlotsState, command: SlotsCommand) => {
  const decision = decide(command, state);
  if (decision._tag === 'Left') return { state, events: [], error: decision.left };
  return { state: decision.right.reduce(evolve, state), events: decision.right, error: null };
};

const claim = (subscriptionId: string, at = 1, existing: string[] = []): SlotsCommand => ({ kind: 'claim', subscriptionId, max: 2, at, existing });

describe('webhook subscription slots', () => {
  it('claims up to the limit, then refuses with the limit in the detail', () => {
    const one = apply(initial, claim('a'));
    const two = apply(one.state, claim('b'));
    expect([...two.state.held.keys()]).to.deep.equal(['a', 'b']);
    const three = apply(two.state, claim('c'));
    expect(three.error).to.deep.include({ code: 'WEBHOOK_LIMIT_REACHED', detail: { max_subscriptions: 2 } });
    expect(three.error?.message).to.include('limit of 2 webhook subscriptions');
  });

  it('claims once per subscription, and a release frees the slot once', () => {
    const held = apply(apply(initial, claim('a')).state, claim('a'));
    expect(held.events).to.deep.equal([]);
    const released = apply(held.state, { kind: 'release', subscriptionId: 'a' });
    expect(released.events.map((e) => e.type)).to.deep.equal([SLOT_EVENTS.released]);
    expect(apply(released.state, { kind: 'release', subscriptionId: 'a' }).events).to.deep.equal([]);
    expect(apply(released.state, claim('b')).error).to.equal(null);
  });

  it('adopts the subscriptions made before slots were counted when the stream starts, and only then', () => {
    expect(apply(initial, claim('new', 1, ['old-1', 'old-2'])).error?.code).to.equal('WEBHOOK_LIMIT_REACHED');
    const started = apply(initial, claim('new', 1, ['old-1']));
    expect([...started.state.held.keys()]).to.deep.equal(['old-1', 'new']);
    const later = apply(apply(started.state, { kind: 'release', subscriptionId: 'old-1' }).state, claim('next', 1, ['old-1', 'other']));
    expect([...later.state.held.keys()]).to.deep.equal(['new', 'next']);
  });

  it('names the claims older than an instant', () => {
    const { state } = apply(apply(initial, claim('early', 10)).state, claim('late', 20));
    expect(claimedBefore(state, 15)).to.deep.equal(['early']);
    expect(claimedBefore(state, 10)).to.deep.equal([]);
  });
});
