// The subscription aggregate's decisions, without I/O: fold the decided events and look at the state;
// secret rotation's grace period is read with a fake clock (µs).
import { expect } from 'chai';
import type { Decided } from '../../src/domain/aggregate.js';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import {
  AUTO_DISABLE_AFTER,
  SUBSCRIPTION_EVENTS,
  contractSecret,
  subscriptionAggregate,
  validSecrets,
  type SubscriptionCommand,
  type SubscriptionState,
} from '../../src/domain/subscription/subscription.js';

const WS = 'ws1';
const aggregate = subscriptionAggregate(WS);

/** Runs commands in order like the command handler does; returns the state and every decided event. */
const run = (commands: SubscriptionCommand[], owner = aggregate) => {
  let state = owner.initial;
  const events: Decided[] = [];
  for (const command of commands) {
    const decision = owner.decide(command, state);
    if (decision._tag === 'Left') return { state, events, error: decision.left };
    events.push(...decision.right);
    state = decision.right.reduce(owner.evolve, state);
  }
  return { state, events, error: null };
};

const create: SubscriptionCommand = { kind: 'create', url: 'https://x.test/h', events: [], description: '', secretEncrypted: 'v1:sealed', at: '2026-01-01T00:00:00.000' };
const failed = (deliveryId: string, round = 1): SubscriptionCommand => ({ kind: 'record_delivery_failed', deliveryId, round });
const succeeded = (deliveryId: string, round = 1): SubscriptionCommand => ({ kind: 'record_delivery_succeeded', deliveryId, round });

describe('webhook subscription aggregate', () => {
  it('creates an active subscription owned by the workspace, without the secret in clear', () => {
    const { state, events } = run([{ ...create, events: ['ticket.created', 'ticket.created'] }]);
    expect(state).to.include({ exists: true, isActive: true, workspaceId: WS, consecutiveFailures: 0, secretEncrypted: 'v1:sealed' });
    expect(state.events).to.deep.equal(['ticket.created']);
    expect(events[0]?.type).to.equal(SUBSCRIPTION_EVENTS.created);
  });

  it('refuses unknown event names with the unknown ones and the whole catalogue (create and update)', () => {
    const { error } = run([{ ...create, events: ['ticket.created', 'ticket.exploded', 'webhook.test'] }]);
    expect(error?.code).to.equal('VALIDATION_ERROR');
    expect(error?.detail).to.deep.equal({ unknown: ['ticket.exploded', 'webhook.test'], valid: [...PUBLIC_EVENT_TYPES] });
    expect(run([create, { kind: 'update', events: ['nope'] }]).error?.detail).to.have.deep.property('unknown', ['nope']);
  });

  it('changes only the fields passed, and nothing at all for an empty update', () => {
    const { state } = run([{ ...create, description: 'd' }, { kind: 'update', url: 'https://y.test' }]);
    expect(state).to.include({ url: 'https://y.test', description: 'd', isActive: true });
    expect(run([create, { kind: 'update' }]).events).to.have.length(1);
  });

  it('deactivates on the 5th failed delivery in a row, in the same decision', () => {
    const four = run([create, failed('d1'), failed('d2'), failed('d3'), failed('d4')]);
    expect(four.state).to.include({ consecutiveFailures: 4, isActive: true });
    const decision = aggregate.decide(failed('d5'), four.state);
    expect(decision._tag === 'Right' && decision.right.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.failureCounted, SUBSCRIPTION_EVENTS.deactivated]);
    expect(AUTO_DISABLE_AFTER).to.equal(5);
  });

  it('counts a repeated report of the same delivery once', () => {
    expect(run([create, failed('d1'), failed('d1'), failed('d1')]).state.consecutiveFailures).to.equal(1);
  });

  it('resets the counter on a success, and records nothing when it is already 0', () => {
    expect(run([create, failed('d1'), failed('d2'), succeeded('d3')]).state.consecutiveFailures).to.equal(0);
    expect(run([create, succeeded('d1')]).events).to.have.length(1);
  });

  it('resets the counter when a manual retry of a failed delivery succeeds, and counts a failed retry round again', () => {
    expect(run([create, failed('d1'), failed('d2'), succeeded('d2', 2)]).state.consecutiveFailures).to.equal(0);
    const retriedAndFailed = run([create, failed('d1'), failed('d1', 2), failed('d1', 2)]);
    expect(retriedAndFailed.state.consecutiveFailures).to.equal(2);
    // A repeated success report of one round resets once; an old report does not count again.
    expect(run([create, failed('d1'), succeeded('d1', 2), failed('d2'), succeeded('d1', 2)]).state.consecutiveFailures).to.equal(1);
  });

  it('PATCH is_active true reactivates and resets, even when already active (rule 4)', () => {
    const disabled = run([create, ...['a', 'b', 'c', 'd', 'e'].map(failed)]).state;
    expect(disabled).to.include({ isActive: false, consecutiveFailures: 5 });
    const reactivate = (state: SubscriptionState) => run([{ kind: 'update', isActive: true }], { ...aggregate, initial: state }).state;
    expect(reactivate(disabled)).to.include({ isActive: true, consecutiveFailures: 0 });
    const activeWithFailures = run([create, failed('a'), failed('b')]).state;
    expect(reactivate(activeWithFailures)).to.include({ isActive: true, consecutiveFailures: 0 });
  });

  it('reseals the secret the log holds: one event with the new sealed value, kept by the state', () => {
    const { state, events } = run([create, { kind: 'reseal', from: 'v1:sealed', to: 'v2:k2:new' }]);
    expect(events.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.created, SUBSCRIPTION_EVENTS.secretResealed]);
    expect(events[1]?.data).to.deep.equal({ secret_encrypted: 'v2:k2:new' });
    expect(state).to.include({ secretEncrypted: 'v2:k2:new', isActive: true, exists: true });
  });

  it('reseals nothing when the secret changed since it was read (another process resealed it first)', () => {
    const raced = run([create, { kind: 'reseal', from: 'v1:sealed', to: 'v2:k2:first' }, { kind: 'reseal', from: 'v1:sealed', to: 'v2:k2:second' }]);
    expect(raced.events.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.created, SUBSCRIPTION_EVENTS.secretResealed]);
    expect(raced.state.secretEncrypted).to.equal('v2:k2:first');
    expect(run([create, { kind: 'delete' }, { kind: 'reseal', from: 'v1:sealed', to: 'v2:k2:new' }]).error?.code).to.equal('WEBHOOK_NOT_FOUND');
  });

  it('is not found for another workspace, when missing, and after deletion', () => {
    const { state } = run([create]);
    const other = subscriptionAggregate('ws2');
    expect(run([{ kind: 'update', description: 'x' }], { ...other, initial: state }).error?.code).to.equal('WEBHOOK_NOT_FOUND');
    expect(run([{ kind: 'delete' }]).error?.code).to.equal('WEBHOOK_NOT_FOUND');
    expect(run([create, { kind: 'delete' }, failed('d1')]).error?.code).to.equal('WEBHOOK_NOT_FOUND');
    expect(run([{ kind: 'reseal', from: 'v1:sealed', to: 'v2:k2:new' }], { ...other, initial: state }).error?.code).to.equal('WEBHOOK_NOT_FOUND');
  });

  it('lets a second delete complete an interrupted one without a new marker', () => {
    const { events, error } = run([create, { kind: 'delete' }, { kind: 'delete' }]);
    expect(error).to.equal(null);
    expect(events.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.created, SUBSCRIPTION_EVENTS.deleted]);
  });

  it('abandons only a stream that never started: a create then finds it taken, anything else finds nothing', () => {
    expect(run([{ kind: 'abandon' }]).events.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.abandoned]);
    expect(run([create, { kind: 'abandon' }]).events.map((e) => e.type)).to.deep.equal([SUBSCRIPTION_EVENTS.created]);
    expect(run([create, { kind: 'delete' }, { kind: 'abandon' }]).state.deleted).to.equal(true);
    expect(run([{ kind: 'abandon' }, create]).error?.code).to.equal('CONFLICT');
    for (const command of [{ kind: 'update', description: 'x' }, { kind: 'delete' }] as const) {
      expect(run([{ kind: 'abandon' }, command]).error?.code).to.equal('WEBHOOK_NOT_FOUND');
    }
  });
});

const SECOND = 1_000_000;
const T0 = 1_800_000_000 * SECOND;

const rotate = (secretEncrypted: string, graceSeconds: number, at: number): SubscriptionCommand => ({ kind: 'rotate_secret', secretEncrypted, graceSeconds, at });

/** What deliveries sign with at `now`: the standard's set, newest first, and the contract's one. */
const signing = (state: SubscriptionState, now: number) => ({
  standard: validSecrets(state.secretEncrypted, state.previousSecret, now),
  contract: contractSecret(state.secretEncrypted, state.previousSecret, now),
});

describe('webhook subscription secret rotation (fake clock)', () => {
  it('before any rotation one secret signs everything', () => {
    const { state } = run([create]);
    expect(state.previousSecret).to.equal(null);
    expect(signing(state, T0)).to.deep.equal({ standard: ['v1:sealed'], contract: 'v1:sealed' });
  });

  it('keeps the replaced secret for the grace period: both sign the standard header, the replaced one the contract header, until it ends', () => {
    const decision = aggregate.decide(rotate('sealed-B', 3600, T0), run([create]).state);
    expect(decision._tag).to.equal('Right');
    const events = decision._tag === 'Right' ? decision.right : [];
    expect(events).to.deep.equal([{ type: SUBSCRIPTION_EVENTS.secretRotated, data: { secret_encrypted: 'sealed-B', rotated_at: T0, previous_expires_at: T0 + 3600 * SECOND } }]);
    const { state } = run([create, rotate('sealed-B', 3600, T0)]);
    expect(state).to.deep.include({ secretEncrypted: 'sealed-B', previousSecret: { secret: 'v1:sealed', expiresAt: T0 + 3600 * SECOND } });
    expect(signing(state, T0)).to.deep.equal({ standard: ['sealed-B', 'v1:sealed'], contract: 'v1:sealed' });
    expect(signing(state, T0 + 3600 * SECOND - 1)).to.deep.equal({ standard: ['sealed-B', 'v1:sealed'], contract: 'v1:sealed' });
    expect(signing(state, T0 + 3600 * SECOND)).to.deep.equal({ standard: ['sealed-B'], contract: 'sealed-B' });
  });

  it('a grace period of 0 ends the replaced secret at once', () => {
    const { state } = run([create, rotate('sealed-B', 0, T0)]);
    expect(signing(state, T0)).to.deep.equal({ standard: ['sealed-B'], contract: 'sealed-B' });
  });

  it('a second rotation during a grace period ends the oldest secret at once: never more than two are valid', () => {
    const { state } = run([create, rotate('sealed-B', 3600, T0), rotate('sealed-C', 600, T0 + 60 * SECOND)]);
    expect(state.previousSecret).to.deep.equal({ secret: 'sealed-B', expiresAt: T0 + 660 * SECOND });
    expect(signing(state, T0 + 61 * SECOND)).to.deep.equal({ standard: ['sealed-C', 'sealed-B'], contract: 'sealed-B' });
    expect(signing(state, T0 + 660 * SECOND)).to.deep.equal({ standard: ['sealed-C'], contract: 'sealed-C' });
  });

  it('a reseal seals the previous secret again with the current one, and only if both are still what the issuer read', () => {
    const rotated = run([create, rotate('sealed-B', 3600, T0)]);
    const both: SubscriptionCommand = { kind: 'reseal', from: 'sealed-B', to: 'sealed-B2', previous: { from: 'v1:sealed', to: 'sealed-A2' } };
    const { state } = run([create, rotate('sealed-B', 3600, T0), both]);
    expect(state).to.deep.include({ secretEncrypted: 'sealed-B2', previousSecret: { secret: 'sealed-A2', expiresAt: T0 + 3600 * SECOND } });
    const stale: SubscriptionCommand = { kind: 'reseal', from: 'sealed-B', to: 'sealed-B2', previous: { from: 'sealed-X', to: 'sealed-A2' } };
    expect(aggregate.decide(stale, rotated.state)).to.deep.equal({ _tag: 'Right', right: [] });
    // A reseal of the current secret alone leaves the previous one as it was.
    const currentOnly = run([create, rotate('sealed-B', 3600, T0), { kind: 'reseal', from: 'sealed-B', to: 'sealed-B2' }]);
    expect(currentOnly.state.previousSecret).to.deep.equal({ secret: 'v1:sealed', expiresAt: T0 + 3600 * SECOND });
  });

  it("refuses to rotate another workspace's, a deleted or an unknown subscription as not found", () => {
    const created = run([create]).state;
    expect(subscriptionAggregate('ws2').decide(rotate('sealed-B', 60, T0), created)).to.deep.include({ _tag: 'Left' });
    expect(run([create, { kind: 'delete' }, rotate('sealed-B', 60, T0)]).error).to.include({ code: 'WEBHOOK_NOT_FOUND' });
    expect(run([rotate('sealed-B', 60, T0)]).error).to.include({ code: 'WEBHOOK_NOT_FOUND' });
  });
});
