// The billing and operator aggregates, pure: each path of a renewal attempt, payments and their
// idempotency, and every emitted public event checked against the catalogue's codec.
import { expect } from 'chai';
import type * as t from 'io-ts';
import { isRight } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../../src/domain/aggregate.js';
import { EventData } from '../../src/domain/catalogue.js';
import { billingAggregate, dueAt, type BillingCommand, type BillingState } from '../../src/domain/billing/billing.js';
import { isPublicEventType } from '../../src/domain/event-types.js';
import { operatorAggregate } from '../../src/domain/operator/operator.js';

const DAY = 24 * 3600 * 1000;
const EXPIRY = Date.parse('2030-01-31T00:00:00.000Z');

/** Folds `commands` from the initial state; returns the events of the last one and the final state. */
const play = <S, C>(aggregate: Aggregate<S, C>, commands: readonly C[]) => {
  let state = aggregate.initial;
  let last: readonly Decided[] = [];
  for (const command of commands) {
    const decided = aggregate.decide(command, state);
    if (!isRight(decided)) return { error: decided.left, state, last };
    last = decided.right;
    for (const e of last) {
      if (isPublicEventType(e.type)) expect((EventData[e.type] as t.Mixed).decode(e.data)._tag === 'Right', `${e.type} ${JSON.stringify(e.data)}`).to.equal(true);
    }
    state = last.reduce(aggregate.evolve, state);
  }
  return { error: null, state, last };
};

const pay = (id: string, amount: number): BillingCommand => ({
  kind: 'receive_payment',
  payment: { payment_id: id, order_id: `o-${id}`, amount, currency: 'USD', method: 'card', transaction_id: `t-${id}` },
});
const subscribe = (over: Partial<Extract<BillingCommand, { kind: 'subscribe' }>> = {}): BillingCommand => ({
  kind: 'subscribe',
  paid: { plan: 'team', price: 30 },
  expiresAt: new Date(EXPIRY).toISOString(),
  autoRenew: true,
  next: null,
  trial: false,
  ...over,
});
const renew = (trigger: 'auto' | 'manual', nowMs = EXPIRY): BillingCommand => ({ kind: 'renew', trigger, nowMs, periodMs: 30 * DAY, entryPlan: 'free' });

const types = (events: readonly Decided[]) => events.map((e) => e.type);

describe('billing aggregate (unit)', () => {
  it('credits payments to the balance once per payment id', () => {
    const { state, last } = play(billingAggregate, [pay('p1', 10.1), pay('p2', 0.2), pay('p2', 0.2)]);
    expect(state.balance).to.equal(10.3);
    expect(last).to.deep.equal([]);
    const first = play(billingAggregate, [pay('p1', 10.1)]).last[0];
    expect(first?.data).to.deep.equal({ payment_id: 'p1', order_id: 'o-p1', amount: 10.1, currency: 'USD', method: 'card', transaction_id: 't-p1', new_balance: 10.1 });
  });

  it('records a failed payment without touching the balance, and refuses a second currency', () => {
    const failed = play(billingAggregate, [pay('p1', 5), { kind: 'fail_payment', payment: { payment_id: 'p2', order_id: 'o', amount: 9, method: 'card', reason: 'cancelled' } }]);
    expect(types(failed.last)).to.deep.equal(['billing.payment_failed']);
    expect(failed.state.balance).to.equal(5);
    const inEuro: BillingCommand = { kind: 'receive_payment', payment: { payment_id: 'p3', order_id: 'o', amount: 1, currency: 'EUR', method: 'card', transaction_id: 't' } };
    const euro = play(billingAggregate, [pay('p1', 5), inEuro]);
    expect(euro.error?.code).to.equal('VALIDATION_ERROR');
  });

  it('renews automatically at expiry when the balance covers the price', () => {
    const { state, last } = play(billingAggregate, [pay('p', 50), subscribe(), renew('auto')]);
    expect(last).to.deep.equal([
      { type: 'billing.plan_renewed', data: { plan: 'team', amount: 30, new_balance: 20, expires_at: new Date(EXPIRY + 30 * DAY).toISOString(), trigger: 'auto' } },
    ]);
    expect(state.balance).to.equal(20);
  });

  it('does nothing automatically before expiry', () => {
    expect(play(billingAggregate, [pay('p', 50), subscribe(), renew('auto', EXPIRY - 1)]).last).to.deep.equal([]);
  });

  it('on an insufficient balance: balance_low, subscription_expired, then downgrade to the entry plan', () => {
    const { state, last } = play(billingAggregate, [pay('p', 10), subscribe(), renew('auto')]);
    expect(types(last)).to.deep.equal(['billing.balance_low', 'billing.subscription_expired', 'billing.plan_downgraded']);
    expect(last[0]?.data).to.deep.equal({ plan: 'team', balance: 10, price: 30, shortfall: 20 });
    expect(last[1]?.data).to.include({ old_plan: 'team', reason: 'insufficient_balance' });
    expect(last[2]?.data).to.deep.equal({ old_plan: 'team', new_plan: 'free', expires_at: null });
    expect(state.paid).to.equal(null);
  });

  it('with auto-renew off and no next plan: expires with auto_renew_disabled', () => {
    const { last } = play(billingAggregate, [pay('p', 100), subscribe({ autoRenew: false }), renew('auto')]);
    expect(types(last)).to.deep.equal(['billing.subscription_expired', 'billing.plan_downgraded']);
    expect(last[0]?.data).to.include({ reason: 'auto_renew_disabled' });
  });

  it('switches to the chosen next plan, paid from the balance', () => {
    const { state, last } = play(billingAggregate, [pay('p', 100), subscribe({ next: { plan: 'business', price: 80 } }), renew('auto')]);
    expect(last).to.have.length(1);
    expect(last[0]).to.deep.include({ type: 'billing.plan_changed' });
    expect(last[0]?.data).to.include({ old_plan: 'team', new_plan: 'business', amount: 80, new_balance: 20 });
    expect(state.paid).to.deep.equal({ plan: 'business', price: 80 });
  });

  it('ends a trial: converted when the next plan is affordable, else downgraded with a reason', () => {
    const converted = play(billingAggregate, [pay('p', 40), subscribe({ trial: true, next: { plan: 'team', price: 30 } }), renew('auto')]).last;
    expect(converted[0]?.data).to.include({ new_plan: 'team', reason: 'trial_converted' });
    const ended = play(billingAggregate, [subscribe({ trial: true, next: { plan: 'team', price: 30 } }), renew('auto')]).last;
    expect(ended).to.deep.equal([{ type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null, reason: 'trial_ended' } }]);
  });

  it('renews manually from the current expiry, or reports balance_low with the trigger', () => {
    const early = EXPIRY - 5 * DAY;
    const renewed = play(billingAggregate, [pay('p', 30), subscribe(), renew('manual', early)]).last;
    expect(renewed[0]?.data).to.include({ trigger: 'manual', expires_at: new Date(EXPIRY + 30 * DAY).toISOString(), new_balance: 0 });
    const low = play(billingAggregate, [pay('p', 29.99), subscribe(), renew('manual', early)]);
    expect(low.last).to.deep.equal([{ type: 'billing.balance_low', data: { plan: 'team', balance: 29.99, price: 30, shortfall: 0.01, trigger: 'manual' } }]);
    expect(low.state.paid).to.deep.equal({ plan: 'team', price: 30 });
  });

  it('refuses a renewal without a paid plan', () => {
    expect(play<BillingState, BillingCommand>(billingAggregate, [renew('manual')]).error?.code).to.equal('VALIDATION_ERROR');
  });
});

describe('billing aggregate at expiry, as the billing clock drives it (unit, fake clock)', () => {
  const expiry = new Date(EXPIRY).toISOString();
  const PERIOD = 30 * DAY;
  /** The clock's command: at `nowMs`, acting on the named expiry. */
  const tick = (nowMs: number, named = expiry): BillingCommand => ({ kind: 'renew', trigger: 'auto', nowMs, periodMs: PERIOD, entryPlan: 'free', expiry: named });
  const iso = (ms: number) => new Date(ms).toISOString();

  it('renewal: plan_renewed with exactly plan, amount, new_balance, expires_at and trigger auto', () => {
    const { state, last } = play(billingAggregate, [pay('p', 75), subscribe(), tick(EXPIRY + 1500)]);
    expect(last).to.deep.equal([{ type: 'billing.plan_renewed', data: { plan: 'team', amount: 30, new_balance: 45, expires_at: iso(EXPIRY + PERIOD), trigger: 'auto' } }]);
    expect(state.expiresAt).to.equal(iso(EXPIRY + PERIOD));
  });

  it('acts once per expiry: the same expiry again, or an expiry that is no longer the plan\'s, decides nothing', () => {
    expect(play(billingAggregate, [pay('p', 100), subscribe(), tick(EXPIRY), tick(EXPIRY + 10)]).last).to.deep.equal([]);
    expect(play(billingAggregate, [pay('p', 100), subscribe(), tick(EXPIRY, iso(EXPIRY - DAY))]).last).to.deep.equal([]);
    // Downgraded to the entry plan by the first attempt: a second one is a no-op, not an error.
    const after = play(billingAggregate, [subscribe(), tick(EXPIRY), tick(EXPIRY + 10)]);
    expect(after.error).to.equal(null);
    expect(after.last).to.deep.equal([]);
    // The next period's expiry acts in its turn.
    expect(types(play(billingAggregate, [pay('p', 100), subscribe(), tick(EXPIRY), tick(EXPIRY + PERIOD, iso(EXPIRY + PERIOD))]).last)).to.deep.equal(['billing.plan_renewed']);
  });

  it('before its expiry, the named expiry decides nothing', () => {
    expect(play(billingAggregate, [pay('p', 100), subscribe(), tick(EXPIRY - 1)]).last).to.deep.equal([]);
  });

  it('a late clock adds no drift; a plan found more than a period past its expiry starts a fresh period from now', () => {
    const late = play(billingAggregate, [pay('p', 100), subscribe(), tick(EXPIRY + DAY)]).last;
    expect(late[0]?.data).to.include({ expires_at: iso(EXPIRY + PERIOD) });
    const down = EXPIRY + PERIOD + DAY;
    const stale = play(billingAggregate, [pay('p', 100), subscribe(), tick(down)]).last;
    expect(stale[0]?.data).to.include({ expires_at: iso(down + PERIOD) });
  });

  it('insufficient balance: balance_low (no trigger), subscription_expired, plan_downgraded, each with exactly its fields', () => {
    const { state, last } = play(billingAggregate, [pay('p', 12.5), subscribe(), tick(EXPIRY)]);
    expect(last).to.deep.equal([
      { type: 'billing.balance_low', data: { plan: 'team', balance: 12.5, price: 30, shortfall: 17.5 } },
      { type: 'billing.subscription_expired', data: { old_plan: 'team', reason: 'insufficient_balance', expired_at: expiry } },
      { type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null } },
    ]);
    expect(state).to.include({ balance: 12.5, paid: null, expiresAt: null });
  });

  it('auto-renew off with no next plan: subscription_expired auto_renew_disabled, then the downgrade; the balance is untouched', () => {
    const { state, last } = play(billingAggregate, [pay('p', 100), subscribe({ autoRenew: false }), tick(EXPIRY)]);
    expect(last).to.deep.equal([
      { type: 'billing.subscription_expired', data: { old_plan: 'team', reason: 'auto_renew_disabled', expired_at: expiry } },
      { type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null } },
    ]);
    expect(state.balance).to.equal(100);
  });

  it('chosen next plan: plan_changed with amount and new_balance, no reason (auto-renew off does not matter)', () => {
    const { state, last } = play(billingAggregate, [pay('p', 100), subscribe({ autoRenew: false, next: { plan: 'business', price: 80 } }), tick(EXPIRY)]);
    expect(last).to.deep.equal([
      { type: 'billing.plan_changed', data: { old_plan: 'team', new_plan: 'business', expires_at: iso(EXPIRY + PERIOD), amount: 80, new_balance: 20 } },
    ]);
    expect(state).to.deep.include({ balance: 20, paid: { plan: 'business', price: 80 }, next: null, expiresAt: iso(EXPIRY + PERIOD) });
  });

  it('chosen next plan of price 0: plan_changed without amount and new_balance (nothing was paid), balance untouched', () => {
    const { state, last } = play(billingAggregate, [pay('p', 10), subscribe({ next: { plan: 'business', price: 0 } }), tick(EXPIRY)]);
    expect(last).to.deep.equal([{ type: 'billing.plan_changed', data: { old_plan: 'team', new_plan: 'business', expires_at: iso(EXPIRY + PERIOD) } }]);
    expect(state).to.deep.include({ balance: 10, paid: { plan: 'business', price: 0 } });
  });

  it('chosen next plan unaffordable: balance_low names the next plan and its price, then expiry and downgrade', () => {
    const { last } = play(billingAggregate, [pay('p', 50), subscribe({ next: { plan: 'business', price: 80 } }), tick(EXPIRY)]);
    expect(last).to.deep.equal([
      { type: 'billing.balance_low', data: { plan: 'business', balance: 50, price: 80, shortfall: 30 } },
      { type: 'billing.subscription_expired', data: { old_plan: 'team', reason: 'insufficient_balance', expired_at: expiry } },
      { type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null } },
    ]);
  });

  it('end of a trial: converted to the paid next plan (plan_changed with amount, new_balance and reason), else downgraded with a reason and no expiry event', () => {
    const trial = subscribe({ trial: true, paid: { plan: 'team', price: 0 }, next: { plan: 'team', price: 30 } });
    const converted = play(billingAggregate, [pay('p', 40), trial, tick(EXPIRY)]);
    expect(converted.last).to.deep.equal([
      { type: 'billing.plan_changed', data: { old_plan: 'team', new_plan: 'team', expires_at: iso(EXPIRY + PERIOD), amount: 30, new_balance: 10, reason: 'trial_converted' } },
    ]);
    expect(converted.state).to.include({ trial: false, balance: 10 });
    const unpaid = play(billingAggregate, [pay('p', 10), trial, tick(EXPIRY)]);
    expect(unpaid.last).to.deep.equal([{ type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null, reason: 'trial_ended' } }]);
    expect(play(billingAggregate, [subscribe({ trial: true }), tick(EXPIRY)]).last).to.deep.equal([
      { type: 'billing.plan_downgraded', data: { old_plan: 'team', new_plan: 'free', expires_at: null, reason: 'trial_ended' } },
    ]);
  });

  it('dueAt: the expiry of a paid plan, none on the entry plan', () => {
    expect(dueAt(play(billingAggregate, [subscribe()]).state)).to.equal(expiry);
    expect(dueAt(play(billingAggregate, [subscribe(), tick(EXPIRY)]).state)).to.equal(null);
    expect(dueAt(billingAggregate.initial)).to.equal(null);
  });
});

describe('operator aggregate (unit)', () => {
  const set = (status: 'online' | 'away' | 'custom', status_text: string | null = null) => ({ user_id: 'u1', status, status_text, status_emoji: null });

  it('emits operator.status.changed on a change only', () => {
    expect(play(operatorAggregate, [set('online')]).last).to.deep.equal([{ type: 'operator.status.changed', data: set('online') }]);
    expect(play(operatorAggregate, [set('online'), set('online')]).last).to.deep.equal([]);
    expect(types(play(operatorAggregate, [set('online'), set('away')]).last)).to.deep.equal(['operator.status.changed']);
  });

  it('needs a status_text for a custom status', () => {
    expect(play(operatorAggregate, [set('custom')]).error?.code).to.equal('VALIDATION_ERROR');
    expect(play(operatorAggregate, [set('custom', 'Lunch')]).last).to.have.length(1);
  });
});
