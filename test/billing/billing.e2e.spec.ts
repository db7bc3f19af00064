// Internal billing and operator routes end to end: the public events they produce reach
// /api/v1/updates with catalogue data, and plan changes follow onto the workspace.
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

  it('produces every billing event and the operator status event, visible in /updates', async () => {
    const payment = { payment_id: 'pay-1', order_id: 'ord-1', amount: 45.5, currency: 'USD', method: 'card', transaction_id: 'tx-1' };
    expect((await billing('/payments', payment)).body.billing.balance).to.equal(45.5);
    await billing('/payments/failed', { payment_id: 'pay-2', order_id: 'ord-2', amount: 10, method: 'card', reason: 'cancelled by the gateway' });
    const past = new Date(Date.now() - 1000).toISOString();
    expect((await billing('/subscription', { plan: 'team', price: 30, expires_at: past })).status).to.equal(200);
    expect((await billing('/renewals', { trigger: 'auto' })).body.events.map((e: { type: string }) => e.type)).to.deep.equal(['billing.plan_renewed']);
    await billing('/subscription', { plan: 'team', price: 30, expires_at: past, next_plan: { plan: 'business', price: 10 } });
    await billing('/renewals', { trigger: 'auto' }); // plan_changed to business, balance 5.5
    expect((await billing('/renewals', { trigger: 'manual' })).body.events[0].type).to.equal('billing.balance_low');
    await billing('/subscription', { plan: 'business', price: 50, expires_at: past });
    const ended = await billing('/renewals', { trigger: 'auto' });
    expect(ended.body.events.map((e: { type: string }) => e.type)).to.deep.equal(['billing.balance_low', 'billing.subscription_expired', 'billing.plan_downgraded']);
    expect(ended.body.billing.plan).to.equal(null);

    const status = await ts.admin('POST', `/internal/v1/workspaces/${ws.workspaceId}/operators/op-7/status`, { status: 'custom', status_text: 'In a meeting', status_emoji: '📅' });
    expect(status.body).to.deep.equal({ user_id: 'op-7', status: 'custom', status_text: 'In a meeting', status_emoji: '📅' });

    const updates = await ws.api('GET', '/api/v1/updates?offset=0&timeout=0&limit=100');
    expect(updates.status).to.equal(200);
    const items = updates.body.items as { type: string; data: unknown; _links: unknown }[];
    expect(new Set(items.map((i) => i.type))).to.deep.equal(
      new Set([
        'billing.payment_received',
        'billing.payment_failed',
        'billing.plan_renewed',
        'billing.plan_changed',
        'billing.balance_low',
        'billing.subscription_expired',
        'billing.plan_downgraded',
        'operator.status.changed',
      ]),
    );
    for (const item of items) {
      expect(isPublicEventType(item.type)).to.equal(true);
      if (isPublicEventType(item.type)) expect((EventData[item.type] as t.Mixed).decode(item.data)._tag === 'Right', item.type).to.equal(true);
      expect(item._links).to.deep.equal({});
    }
  });

  it('moves the workspace to the billing plan (knowledge base opens and closes with it)', async () => {
    const other = await ts.createWorkspace('free');
    const path = `/internal/v1/workspaces/${other.workspaceId}/billing`;
    expect((await other.api('GET', '/api/v1/articles')).status).to.equal(403);
    await ts.admin('PUT', `${path}/subscription`, { plan: 'team', price: 30, expires_at: new Date(Date.now() - 1000).toISOString(), auto_renew: false });
    expect((await other.api('GET', '/api/v1/articles')).status).to.equal(200);
    await ts.admin('POST', `${path}/renewals`, { trigger: 'auto' });
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
