// Billing through the internal routes, standing in for the payment gateway and the customer's plan
// choices; what happens at an expiry is the service's billing clock acting by itself.
//
// The tour (the printed workspace, once): each scenario sets a plan that expires LEAD_MS ahead and
// waits until the clock has acted on it, so every billing.* event occurs within a few seconds whatever
// BILLING_PERIOD is. The steady loop (every workspace): a paid plan with auto-renewal, renewed by the
// clock each BILLING_PERIOD, top-ups that keep the balance ahead of it, and now and then a failed payment.
import { randomUUID } from 'node:crypto';
import type { Random } from '../torture/random.js';
import { routesOf, type Sim, type SimWorkspace } from './client.js';

/** How far ahead a scenario's plan expires: the clock acts on it that soon. */
const LEAD_MS = 400;
/** Longest wait for the clock to act on an expiry before it counts as an error. */
const ACT_TIMEOUT_MS = 10_000;
const LOOK_EVERY_MS = 50;

export interface BillingPlans {
  /** A paid plan, and a dearer one (PLANS of the service; the defaults are team and business). */
  readonly paid: string;
  readonly upgrade: string;
}

export interface BillingOptions {
  readonly plans: BillingPlans;
  /** The service's clock, in ms (the local clock corrected by the skew seen in its Date header). */
  readonly now: () => number;
}

interface BillingView {
  readonly balance: number;
  readonly plan: string | null;
  readonly price: number | null;
  readonly expires_at: string | null;
}

interface Subscription {
  readonly plan: string;
  readonly price: number;
  readonly auto_renew?: boolean;
  readonly next_plan?: { readonly plan: string; readonly price: number };
  readonly trial?: boolean;
}

const PRICE = 10;
const METHODS = ['card', 'sbp', 'invoice'];
const FAILURES = ['Cancelled by the payer', 'Card declined by the issuer', '3-D Secure not completed'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const billingOf = (sim: Sim, ws: SimWorkspace, r: Random, o: BillingOptions, paced: boolean) => {
  const { internal } = routesOf(sim, ws, paced);
  const ids = () => {
    const id = randomUUID().slice(0, 13);
    return { payment_id: `pay-${id}`, order_id: `order-${id}` };
  };
  const view = async (): Promise<BillingView> => (await internal('GET', '/billing')).billing;
  return {
    view,
    pay: (amount: number) => internal('POST', '/billing/payments', { ...ids(), amount, currency: 'USD', method: r.pick(METHODS), transaction_id: `tx-${randomUUID().slice(0, 13)}` }),
    fail: (amount: number) => internal('POST', '/billing/payments/failed', { ...ids(), amount, method: r.pick(METHODS), reason: r.pick(FAILURES) }),
    renewManually: () => internal('POST', '/billing/renewals', { trigger: 'manual' }),
    /** Sets the plan, expiring LEAD_MS from now; answers the billing as set. */
    subscribe: async (s: Subscription): Promise<BillingView> =>
      (await internal('PUT', '/billing/subscription', { ...s, expires_at: new Date(o.now() + LEAD_MS).toISOString() })).billing,
    /** Waits until the clock has acted on the expiry `set` shows (the plan or its expiry moved). */
    async acted(set: BillingView): Promise<void> {
      const deadline = Date.now() + ACT_TIMEOUT_MS;
      for (;;) {
        await sleep(LOOK_EVERY_MS);
        const now = await view();
        if (now.plan !== set.plan || now.expires_at !== set.expires_at) return;
        if (Date.now() > deadline) throw sim.fail('billing clock', `the expiry ${set.expires_at} of plan ${set.plan} in workspace ${ws.id} was not acted on within ${ACT_TIMEOUT_MS} ms`);
      }
    },
  };
};

/** Every billing.* event of the catalogue in the workspace, one scenario after the other (about 4 s). */
export const billingTour = async (sim: Sim, ws: SimWorkspace, r: Random, o: BillingOptions): Promise<void> => {
  const b = billingOf(sim, ws, r, o, false);
  const { paid, upgrade } = o.plans;
  const expire = async (s: Subscription) => b.acted(await b.subscribe(s));
  await b.pay(100); // payment_received
  await b.fail(30); // payment_failed
  await expire({ plan: paid, price: PRICE, auto_renew: true }); // plan_renewed (auto)
  await b.renewManually(); // plan_renewed (manual)
  await expire({ plan: paid, price: PRICE, next_plan: { plan: upgrade, price: 2 * PRICE } }); // plan_changed with amount, new_balance
  await expire({ plan: upgrade, price: 0, trial: true, next_plan: { plan: paid, price: PRICE } }); // plan_changed, reason trial_converted
  // The next three end on the entry plan, whose monthly ticket limit is low: new tickets wait meanwhile.
  ws.entryPlanRisk = true;
  try {
    const dear = await b.subscribe({ plan: upgrade, price: 1000 });
    await b.renewManually(); // balance_low with trigger manual
    await b.acted(dear); // balance_low, subscription_expired (insufficient_balance), plan_downgraded
    await expire({ plan: paid, price: PRICE, auto_renew: false }); // subscription_expired (auto_renew_disabled), plan_downgraded
    await expire({ plan: upgrade, price: 0, trial: true }); // plan_downgraded, reason trial_ended
    await b.subscribe({ plan: paid, price: PRICE, auto_renew: true });
  } finally {
    ws.entryPlanRisk = false;
  }
};

/** A paid plan with auto-renewal (renewed by the clock every BILLING_PERIOD) and enough balance for it. */
export const startPaidPlan = async (sim: Sim, ws: SimWorkspace, r: Random, o: BillingOptions): Promise<void> => {
  const b = billingOf(sim, ws, r, o, false);
  await b.pay(200);
  await b.subscribe({ plan: o.plans.paid, price: PRICE, auto_renew: true });
};

/** Until the run ends: top-ups that stay ahead of the renewals, and now and then a failed payment. */
export const billingLoop = async (sim: Sim, ws: SimWorkspace, r: Random, o: BillingOptions): Promise<void> => {
  const b = billingOf(sim, ws, r, o, true);
  while (!sim.stopped()) {
    const now = await b.view();
    if (now.plan === null) {
      sim.log(`workspace ${ws.id} fell back to the entry plan: subscribing again`);
      await b.subscribe({ plan: o.plans.paid, price: PRICE, auto_renew: true });
    }
    if (now.balance < 20 * PRICE || r.chance(0.2)) await b.pay(r.int(5, 30) * PRICE);
    if (r.chance(0.25)) await b.fail(r.int(1, 10) * PRICE);
    await sleep(r.int(300, 1000));
  }
};
