// A workspace's prepaid balance and paid plan (stream `billing-<workspace>`). Payments credit the
// balance; a renewal attempt (the scheduler at expiry: trigger auto, or the customer: manual)
// charges the plan price, switches to the chosen next plan, or ends the paid plan. Amounts are
// in the balance's currency, rounded to cents.
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../aggregate.js';
import type { EventDataOf, PublicEvent } from '../catalogue.js';
import { domainError, type DomainError } from '../errors.js';

export const SUBSCRIPTION_SET = 'billing.subscription_set';

export const billingStream = (workspaceId: string): string => `billing-${workspaceId}`;

export interface PricedPlan {
  readonly plan: string;
  readonly price: number;
}

export interface BillingState {
  readonly balance: number;
  readonly currency: string | null;
  /** The paid plan; null while on the entry plan. */
  readonly paid: PricedPlan | null;
  readonly expiresAt: string | null;
  readonly autoRenew: boolean;
  /** The plan chosen to follow the current one when it ends. */
  readonly next: PricedPlan | null;
  readonly trial: boolean;
  /** Payment ids already processed (received or failed), so gateway retries change nothing. */
  readonly payments: readonly string[];
}

export type BillingCommand =
  | { readonly kind: 'subscribe'; readonly paid: PricedPlan; readonly expiresAt: string; readonly autoRenew: boolean; readonly next: PricedPlan | null; readonly trial: boolean }
  | { readonly kind: 'receive_payment'; readonly payment: Omit<EventDataOf<'billing.payment_received'>, 'new_balance'> }
  | { readonly kind: 'fail_payment'; readonly payment: EventDataOf<'billing.payment_failed'> }
  | {
      readonly kind: 'renew';
      readonly trigger: 'auto' | 'manual';
      readonly nowMs: number;
      readonly periodMs: number;
      readonly entryPlan: string;
      /**
       * The expiry this attempt acts on (the billing clock names it): once that expiry has been acted
       * on, or the plan changed, the state's expiry differs and the command decides nothing. So a
       * second attempt at the same expiry (a retry, a restart, another process) is a no-op.
       */
      readonly expiry?: string;
    };

const initial: BillingState = { balance: 0, currency: null, paid: null, expiresAt: null, autoRenew: true, next: null, trial: false, payments: [] };

export const money = (amount: number): number => Math.round(amount * 100) / 100;

/** When the paid plan ends (ISO 8601), or null on the entry plan: what the billing clock waits for. */
export const dueAt = (state: BillingState): string | null => (state.paid === null ? null : state.expiresAt);

/** The events that move a plan's expiry (what the billing clock's due-list follows). */
export const EXPIRY_EVENT_TYPES: readonly string[] = [SUBSCRIPTION_SET, 'billing.plan_renewed', 'billing.plan_changed', 'billing.plan_downgraded'];

const onEntryPlan = (state: BillingState): BillingState => ({ ...state, paid: null, expiresAt: null, next: null, trial: false });

const evolve: Aggregate<BillingState, BillingCommand>['evolve'] = (state, { type, data }) => {
  const num = (key: string) => Number(data[key]);
  switch (type) {
    case SUBSCRIPTION_SET: {
      const next = data['next_plan'];
      return {
        ...state,
        paid: { plan: String(data['plan']), price: num('price') },
        expiresAt: String(data['expires_at']),
        autoRenew: data['auto_renew'] === true,
        next: typeof next === 'string' ? { plan: next, price: num('next_price') } : null,
        trial: data['trial'] === true,
      };
    }
    case 'billing.payment_received':
      return { ...state, balance: num('new_balance'), currency: String(data['currency']), payments: [...state.payments, String(data['payment_id'])] };
    case 'billing.payment_failed':
      return { ...state, payments: [...state.payments, String(data['payment_id'])] };
    case 'billing.plan_renewed':
      return { ...state, balance: num('new_balance'), expiresAt: String(data['expires_at']) };
    case 'billing.plan_changed':
      return {
        ...state,
        balance: data['new_balance'] === undefined ? state.balance : num('new_balance'),
        paid: { plan: String(data['new_plan']), price: state.next?.price ?? 0 },
        expiresAt: String(data['expires_at']),
        next: null,
        trial: false,
      };
    case 'billing.plan_downgraded':
      return onEntryPlan(state);
    default:
      return state;
  }
};

const event = (e: PublicEvent): Decided => ({ type: e.type, data: { ...e.data } });

const invalid = (message: string, detail: Record<string, string>): Either<DomainError, never> => left(domainError('VALIDATION_ERROR', message, detail));

/** The decision when a paid plan ends: renew, switch to the next plan, or fall back to the entry plan. */
const atExpiry = (state: BillingState, paid: PricedPlan, command: Extract<BillingCommand, { kind: 'renew' }>, expiresAt: string): Decided[] => {
  // The next period starts at the expiry, so a clock that acts late adds no drift; a plan found more
  // than a period past its expiry (the service was down) starts a fresh period now instead of
  // charging for time gone by.
  const expiredMs = Date.parse(expiresAt);
  const nextExpiry = new Date((command.nowMs - expiredMs < command.periodMs ? expiredMs : command.nowMs) + command.periodMs).toISOString();
  const downgrade = (reason?: string) =>
    event({ type: 'billing.plan_downgraded', data: { old_plan: paid.plan, new_plan: command.entryPlan, expires_at: null, ...(reason === undefined ? {} : { reason }) } });
  const unaffordable = (plan: PricedPlan) => [
    event({ type: 'billing.balance_low', data: { plan: plan.plan, balance: state.balance, price: plan.price, shortfall: money(plan.price - state.balance) } }),
    event({ type: 'billing.subscription_expired', data: { old_plan: paid.plan, reason: 'insufficient_balance', expired_at: expiresAt } }),
    downgrade(),
  ];
  // Spec: `amount` and `new_balance` come with payment of the chosen plan (a plan of price 0 is not paid), `reason` for a trial.
  const change = (to: PricedPlan, reason?: string) =>
    event({
      type: 'billing.plan_changed',
      data: {
        old_plan: paid.plan,
        new_plan: to.plan,
        expires_at: nextExpiry,
        ...(to.price > 0 ? { amount: to.price, new_balance: money(state.balance - to.price) } : {}),
        ...(reason === undefined ? {} : { reason }),
      },
    });

  if (state.trial) return state.next !== null && state.balance >= state.next.price ? [change(state.next, 'trial_converted')] : [downgrade('trial_ended')];
  if (state.next !== null) return state.balance >= state.next.price ? [change(state.next)] : unaffordable(state.next);
  if (!state.autoRenew) {
    return [event({ type: 'billing.subscription_expired', data: { old_plan: paid.plan, reason: 'auto_renew_disabled', expired_at: expiresAt } }), downgrade()];
  }
  if (state.balance < paid.price) return unaffordable(paid);
  return [
    event({ type: 'billing.plan_renewed', data: { plan: paid.plan, amount: paid.price, new_balance: money(state.balance - paid.price), expires_at: nextExpiry, trigger: 'auto' } }),
  ];
};

const decide: Aggregate<BillingState, BillingCommand>['decide'] = (command, state) => {
  switch (command.kind) {
    case 'subscribe': {
      const { paid, next } = command;
      const data = { plan: paid.plan, price: paid.price, expires_at: command.expiresAt, auto_renew: command.autoRenew, next_plan: next?.plan ?? null, next_price: next?.price ?? null, trial: command.trial };
      return right([{ type: SUBSCRIPTION_SET, data }]);
    }
    case 'receive_payment': {
      const { payment } = command;
      if (state.payments.includes(payment.payment_id)) return right([]);
      if (state.currency !== null && state.currency !== payment.currency) {
        return invalid('The payment currency differs from the balance currency', { field: 'currency', reason: `balance is in ${state.currency}` });
      }
      return right([event({ type: 'billing.payment_received', data: { ...payment, new_balance: money(state.balance + payment.amount) } })]);
    }
    case 'fail_payment':
      return right(state.payments.includes(command.payment.payment_id) ? [] : [event({ type: 'billing.payment_failed', data: command.payment })]);
    case 'renew': {
      const { paid, expiresAt } = state;
      // Named expiry already acted on (renewed, changed, or downgraded to the entry plan): nothing to do.
      if (command.expiry !== undefined && command.expiry !== dueAt(state)) return right([]);
      if (paid === null || expiresAt === null) return invalid('The workspace has no paid plan to renew', { field: 'plan', reason: 'entry_plan' });
      if (command.trigger === 'auto') return right(command.nowMs < Date.parse(expiresAt) ? [] : atExpiry(state, paid, command, expiresAt));
      if (state.balance < paid.price) {
        return right([event({ type: 'billing.balance_low', data: { plan: paid.plan, balance: state.balance, price: paid.price, shortfall: money(paid.price - state.balance), trigger: 'manual' } })]);
      }
      // A manual renewal extends from the current expiry, so paying early loses no days.
      const from = Math.max(command.nowMs, Date.parse(expiresAt));
      const expires = new Date(from + command.periodMs).toISOString();
      return right([event({ type: 'billing.plan_renewed', data: { plan: paid.plan, amount: paid.price, new_balance: money(state.balance - paid.price), expires_at: expires, trigger: 'manual' } })]);
    }
  }
};

export const billingAggregate: Aggregate<BillingState, BillingCommand> = { initial, evolve, decide };
