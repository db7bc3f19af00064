// Internal billing commands (/internal/v1, admin token): they stand in for the payment gateway and
// the customer's plan choices, so every billing.* event can be produced end to end. Expiries act by
// themselves (./clock.ts); POST renewals with trigger auto acts on a due expiry at once, as the clock
// would, and trigger manual renews early. A plan change is mirrored onto the workspace (./commands.ts).
import * as t from 'io-ts';
import type { Core } from '../app/core.js';
import { billingAggregate, billingStream, type BillingCommand, type BillingState } from '../domain/billing/billing.js';
import { BillingTrigger } from '../domain/catalogue.js';
import { business, notFound } from '../http/api-error.js';
import type { RouteModule } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { decode, text } from '../http/validation.js';
import { runBillingCommand } from './commands.js';

const Amount = t.refinement(t.number, (n) => Number.isFinite(n) && n > 0 && n < 1e12, 'positive amount');
const Price = t.refinement(t.number, (n) => Number.isFinite(n) && n >= 0 && n < 1e12, 'price (>= 0)');
const Id = text(200);
const Timestamp = t.refinement(t.string, (s) => !Number.isNaN(Date.parse(s)), 'ISO 8601 timestamp');

const view = (s: BillingState) => ({
  balance: s.balance,
  currency: s.currency,
  plan: s.paid?.plan ?? null,
  price: s.paid?.price ?? null,
  expires_at: s.expiresAt,
  auto_renew: s.autoRenew,
  next_plan: s.next?.plan ?? null,
  trial: s.trial,
});

export const billingRoutes = (core: Core): RouteModule => {
  const Plan = t.keyof(Object.fromEntries(Object.keys(core.config.plans).map((p) => [p, null])) as Record<string, null>);
  const Subscription = t.intersection([
    t.type({ plan: Plan, price: Price, expires_at: Timestamp }),
    t.partial({ auto_renew: t.boolean, next_plan: t.union([t.type({ plan: Plan, price: Price }), t.null]), trial: t.boolean }),
  ]);
  const Payment = t.type({ payment_id: Id, order_id: Id, amount: Amount, currency: text(10), method: text(50), transaction_id: Id });
  const FailedPayment = t.type({ payment_id: Id, order_id: Id, amount: Amount, method: text(50), reason: text(500) });
  const Renewal = t.type({ trigger: BillingTrigger });

  const run = async (ctx: ApiContext, command: BillingCommand) => {
    const workspaceId = String(ctx.params['workspace_id']);
    if (core.directory.workspace(workspaceId) === undefined) throw notFound('Workspace');
    const result = await runBillingCommand(core, workspaceId, command, ctx.state.scope);
    if (result._tag === 'Left') throw business(result.left);
    ctx.body = { workspace_id: workspaceId, billing: view(result.right.state), events: result.right.records.map((r) => ({ type: r.type, data: r.data })) };
  };

  return {
    internal(router) {
      const base = '/workspaces/:workspace_id/billing';
      router.get(base, async (ctx: ApiContext) => {
        const workspaceId = String(ctx.params['workspace_id']);
        if (core.directory.workspace(workspaceId) === undefined) throw notFound('Workspace');
        const events = await core.log.readStream(billingStream(workspaceId));
        ctx.body = { workspace_id: workspaceId, billing: view(events.reduce(billingAggregate.evolve, billingAggregate.initial)) };
      });
      router.put(`${base}/subscription`, async (ctx: ApiContext) => {
        const body = decode(Subscription, ctx.request.body, 'body');
        await run(ctx, {
          kind: 'subscribe',
          paid: { plan: body.plan, price: body.price },
          expiresAt: new Date(body.expires_at).toISOString(),
          autoRenew: body.auto_renew ?? true,
          next: body.next_plan ?? null,
          trial: body.trial ?? false,
        });
      });
      router.post(`${base}/payments`, async (ctx: ApiContext) => {
        await run(ctx, { kind: 'receive_payment', payment: decode(Payment, ctx.request.body, 'body') });
      });
      router.post(`${base}/payments/failed`, async (ctx: ApiContext) => {
        await run(ctx, { kind: 'fail_payment', payment: decode(FailedPayment, ctx.request.body, 'body') });
      });
      router.post(`${base}/renewals`, async (ctx: ApiContext) => {
        const { trigger } = decode(Renewal, ctx.request.body, 'body');
        await run(ctx, { kind: 'renew', trigger, nowMs: Math.floor(core.clock() / 1000), periodMs: core.config.billing.periodMs, entryPlan: core.config.defaultPlan });
      });
    },
  };
};
