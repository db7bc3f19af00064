// Internal billing and operator routes end to end: the public events they produce reach
// /api/v1/updates with catalogue data, and plan changes follow onto the workspace. The events at
// expiry come from the billing clock: test/billing/billing-clock.e2e.spec.ts.
import { expect } from 'chai';
import type * as t from 'io-ts';
import { EventData } from '../../src/domain/catalogue.js';
import { isPublicEventType } from '../../src/domain/event-types.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

describe('internal billing and operator commands (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  const billing = (path: string, body?: unknown) => ts.admin(body === undefined ? 'GET' : path.endsWith('subscription') ? 'PUT' : 'POST', `/internal/v1/workspaces/${ws.workspaceId}/billing${path}`, body);

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace('free');
  });
  after(() => ts.close());

  it('payments, a failed payment, a manual renewal and a short balance, and the operator status event, visible in /updates', async () => {
    const payment = { payment_id: 'pay-1', order_id: 'ord-1', amount: 45.5, currency: 'USD', method: 'card', transaction_id: 'tx-1' };
    expect((await billing('/payments', payment)).body.billing.balance).to.equal(45.5);
    await billing('/payments/failed', { payment_id: 'pay-2', order_id: 'ord-2', amount: 10, method: 'card', reason: 'cancelled by the gateway' });
    const expiry = Date.parse('2031-01-01T00:00:00.000Z');
    expect((await billing('/subscription', { plan: 'team', price: 30, expires_at: new Date(expiry).toISOString() })).status).to.equal(200);
    // Trigger auto acts only on a due expiry, as the billing clock does (test/billing/billing-clock.e2e.spec.ts).
    expect((await billing('/renewals', { trigger: 'auto' })).body.events).to.deep.equal([]);
    // A manual renewal extends from the current expiry by BILLING_PERIOD (default one month of 30 days).
    expect((await billing('/renewals', { trigger: 'manual' })).body.events).to.deep.equal([
      { type: 'billing.plan_renewed', data: { plan: 'team', amount: 30, new_balance: 15.5, expires_at: new Date(expiry + 30 * 86_400_000).toISOString(), trigger: 'manual' } },
    ]);
    expect((await billing('/renewals', { trigger: 'manual' })).body.events).to.deep.equal([
      { type: 'billing.balance_low', data: { plan: 'team', balance: 15.5, price: 30, shortfall: 14.5, trigger: 'manual' } },
    ]);

    const status = await ts.admin('POST', `/internal/v1/workspaces/${ws.workspaceId}/operators/op-7/status`, { status: 'custom', status_text: 'In a meeting', status_emoji: '📅' });
    expect(status.body).to.deep.equal({ user_id: 'op-7', status: 'custom', status_text: 'In a meeting', status_emoji: '📅' });

    const updates = await ws.api('GET', '/api/v1/updates?offset=0&timeout=0&limit=100');
    expect(updates.status).to.equal(200);
    const items = updates.body.items as { type: string; data: unknown; _links: unknown }[];
    expect(items.map((i) => i.type)).to.deep.equal(['billing.payment_received', 'billing.payment_failed', 'billing.plan_renewed', 'billing.balance_low', 'operator.status.changed']);
    for (const item of items) {
      expect(isPublicEventType(item.type)).to.equal(true);
      if (isPublicEventType(item.type)) expect((EventData[item.type] as t.Mixed).decode(item.data)._tag === 'Right', item.type).to.equal(true);
      expect(item._links).to.deep.equal({});
    }
  });

  it('moves the workspace to the billing plan (knowledge base opens with it, and closes when the clock ends it)', async () => {
    const other = await ts.createWorkspace('free');
    const path = `/internal/v1/workspaces/${other.workspaceId}/billing`;
    expect((await other.api('GET', '/api/v1/articles')).status).to.equal(403);
    await ts.admin('PUT', `${path}/subscription`, { plan: 'team', price: 30, expires_at: new Date(Date.now() + 3_600_000).toISOString(), auto_renew: false });
    expect((await other.api('GET', '/api/v1/articles')).status).to.equal(200);
    // Already expired: the billing clock ends it (auto-renew off) without any call.
    await ts.admin('PUT', `${path}/subscription`, { plan: 'team', price: 30, expires_at: new Date(Date.now() - 1000).toISOString(), auto_renew: false });
    for (let i = 0; i < 100 && (await other.api('GET', '/api/v1/articles')).status !== 403; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await other.api('GET', '/api/v1/articles')).status).to.equal(403);
  });

  it('refuses unknown workspaces (404), bad bodies (422) and calls without the admin token (401)', async () => {
    expect((await ts.admin('POST', `/internal/v1/workspaces/${'0'.repeat(32)}/billing/renewals`, { trigger: 'auto' })).status).to.equal(404);
    const bad = await billing('/payments', { payment_id: 'x', order_id: 'y', amount: -1, currency: 'USD', method: 'card', transaction_id: 'z' });
    expect(bad.status).to.equal(422);
    expect(bad.body.detail[0].loc).to.deep.equal(['body', 'amount']);
    expect((await ws.api('POST', `/internal/v1/workspaces/${ws.workspaceId}/billing/renewals`, { trigger: 'auto' })).status).to.equal(401);
  });
});
