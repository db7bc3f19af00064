// The billing clock end to end, on periods of a second or two (BILLING_PERIOD): paid plans act at
// their expiry with no outside call, and the events reach /api/v1/updates and a webhook subscriber
// with exactly the catalogue's data; each expiry acts once across a restart, when it passed while the
// service was stopped, and with two API servers (two clocks) on one shared SQLite log.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type * as t from 'io-ts';
import { billingAggregate, billingStream } from '../../src/domain/billing/billing.js';
import { EventData } from '../../src/domain/catalogue.js';
import { isPublicEventType } from '../../src/domain/event-types.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const BILLING_TYPES = ['billing.plan_renewed', 'billing.plan_changed', 'billing.plan_downgraded', 'billing.balance_low', 'billing.subscription_expired'];

interface Seen {
  readonly type: string;
  readonly data: Record<string, unknown>;
}

const iso = (ms: number) => new Date(ms).toISOString();
/** An expiry on a whole second, so that the periods after it are easy to name. */
const expiryIn = (ms: number) => Math.ceil((Date.now() + ms) / 1000) * 1000;

/** The workspace's billing events at expiry, as the log holds them. */
const clockEvents = async (ts: TestService, workspaceId: string): Promise<Seen[]> =>
  (await ts.service.core.log.readAll({ after: 0, workspaceId, types: BILLING_TYPES })).map((e) => ({ type: e.type, data: e.data }));

const waitUntil = async <T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
};

/** Waits until the workspace's clock events end with `last`, and gives them. */
const settled = (ts: TestService, workspaceId: string, last: string) =>
  waitUntil(`${last} in ${workspaceId}`, async () => {
    const events = await clockEvents(ts, workspaceId);
    return events.at(-1)?.type === last ? events : undefined;
  });

/** The plans mirrored onto the workspace (the mirror follows the billing append), once the last is `last`. */
const planChanges = (ts: TestService, workspaceId: string, last: string) =>
  waitUntil(`workspace plan ${last}`, async () => {
    const plans = (await ts.service.core.log.readAll({ after: 0, workspaceId, types: ['workspace.plan_set'] })).map((e) => e.data['plan']);
    return plans.at(-1) === last ? plans : undefined;
  });

const billingPath = (workspaceId: string) => `/internal/v1/workspaces/${workspaceId}/billing`;
const pay = async (ts: TestService, workspaceId: string, amount: number, id = `pay-${workspaceId}-${amount}`) => {
  const paid = await ts.admin('POST', `${billingPath(workspaceId)}/payments`, { payment_id: id, order_id: id, amount, currency: 'USD', method: 'card', transaction_id: id });
  expect(paid.status).to.equal(200);
};
const subscribe = async (ts: TestService, workspaceId: string, body: Record<string, unknown>) => {
  const set = await ts.admin('PUT', `${billingPath(workspaceId)}/subscription`, body);
  expect(set.status, JSON.stringify(set.body)).to.equal(200);
};

/**
 * The expiries that `events` acted on, in turn, from `first`: each renewal or change extends the one it
 * acted on by exactly one period, or starts a fresh period from its own time when it acted a whole
 * period late (a loaded machine; test/billing/billing.unit.spec.ts pins that rule with a fake clock).
 */
const expiries = (events: readonly Seen[], first: number, periodMs: number): number[] => {
  const acted = [first];
  for (const e of events.filter((x) => x.type === 'billing.plan_renewed' || x.type === 'billing.plan_changed')) {
    const due = acted.at(-1) as number;
    const next = Date.parse(String(e.data['expires_at']));
    expect(next - due === periodMs || next - due >= 2 * periodMs, `${iso(next)} after ${iso(due)}`).to.equal(true);
    acted.push(next);
  }
  return acted;
};

const renewed = (expiresAtMs: number, newBalance: number, plan = 'team', amount = 30): Seen => ({
  type: 'billing.plan_renewed',
  data: { plan, amount, new_balance: newBalance, expires_at: iso(expiresAtMs), trigger: 'auto' },
});
const ranOut = (expiredMs: number, balance: number, plan = 'team', price = 30): Seen[] => [
  { type: 'billing.balance_low', data: { plan, balance, price, shortfall: Math.round((price - balance) * 100) / 100 } },
  { type: 'billing.subscription_expired', data: { old_plan: plan, reason: 'insufficient_balance', expired_at: iso(expiredMs) } },
  { type: 'billing.plan_downgraded', data: { old_plan: plan, new_plan: 'free', expires_at: null } },
];

describe('billing clock (e2e)', function () {
  this.timeout(60_000);

  describe('one service, BILLING_PERIOD=1s', () => {
    let ts: TestService;
    let receiver: Receiver;

    before(async () => {
      ts = await startTestService({ BILLING_PERIOD: '1s' });
      receiver = await startReceiver();
    });
    after(async () => {
      await ts?.close();
      await receiver?.close();
    });

    it('renews by itself each period until the balance runs out, then expires and downgrades; /updates and a webhook see it all', async () => {
      const ws: TestWorkspace = await ts.createWorkspace('free');
      const hook = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: BILLING_TYPES });
      expect(hook.status).to.equal(201);
      await pay(ts, ws.workspaceId, 100);
      const expiry = expiryIn(1000);
      await subscribe(ts, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry) });
      expect((await ws.api('GET', '/api/v1/articles')).status).to.equal(200);

      const events = await settled(ts, ws.workspaceId, 'billing.plan_downgraded');
      const due = expiries(events, expiry, 1000);
      const expected = [renewed(due[1] as number, 70), renewed(due[2] as number, 40), renewed(due[3] as number, 10), ...ranOut(due[3] as number, 10)];
      expect(events).to.deep.equal(expected);
      // The plan change is mirrored onto the workspace: the knowledge base closes with the paid plan.
      expect(await planChanges(ts, ws.workspaceId, 'free')).to.deep.equal(['team', 'free']);
      expect((await ws.api('GET', '/api/v1/articles')).status).to.equal(403);

      const updates = await ws.api('GET', `/api/v1/updates?offset=0&timeout=0&limit=100&types=${BILLING_TYPES.join(',')}`);
      expect(updates.status).to.equal(200);
      const items = updates.body.items as { type: string; data: Record<string, unknown>; _links: unknown }[];
      expect(items.map((i) => ({ type: i.type, data: i.data }))).to.deep.equal(expected);
      for (const item of items) {
        expect(isPublicEventType(item.type) && (EventData[item.type] as t.Mixed).decode(item.data)._tag === 'Right', item.type).to.equal(true);
        expect(item._links).to.deep.equal({});
      }

      const delivered = await receiver.waitForRequests(expected.length);
      const bodies = delivered.map((r) => JSON.parse(r.body.toString('utf8')) as Seen);
      expect(bodies.map((b) => ({ type: b.type, data: b.data }))).to.have.deep.members(expected);
    });

    it('a chosen next plan: plan_changed paid from the balance, then auto-renew off ends the plan with auto_renew_disabled', async () => {
      const ws = await ts.createWorkspace('free');
      await pay(ts, ws.workspaceId, 100);
      const expiry = expiryIn(1000);
      await subscribe(ts, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry), auto_renew: false, next_plan: { plan: 'business', price: 45.5 } });
      const events = await settled(ts, ws.workspaceId, 'billing.plan_downgraded');
      const [, changedTo] = expiries(events, expiry, 1000);
      expect(events).to.deep.equal([
        { type: 'billing.plan_changed', data: { old_plan: 'team', new_plan: 'business', expires_at: iso(changedTo as number), amount: 45.5, new_balance: 54.5 } },
        { type: 'billing.subscription_expired', data: { old_plan: 'business', reason: 'auto_renew_disabled', expired_at: iso(changedTo as number) } },
        { type: 'billing.plan_downgraded', data: { old_plan: 'business', new_plan: 'free', expires_at: null } },
      ]);
      expect(await planChanges(ts, ws.workspaceId, 'free')).to.deep.equal(['team', 'business', 'free']);
    });

    it('the end of a trial: plan_changed with the reason when the next plan is paid', async () => {
      const ws = await ts.createWorkspace('free');
      await pay(ts, ws.workspaceId, 40);
      const expiry = expiryIn(1000);
      await subscribe(ts, ws.workspaceId, { plan: 'team', price: 0, expires_at: iso(expiry), trial: true, next_plan: { plan: 'team', price: 30 } });
      const events = await settled(ts, ws.workspaceId, 'billing.plan_downgraded');
      const [, converted] = expiries(events, expiry, 1000);
      expect(events[0]).to.deep.equal({
        type: 'billing.plan_changed',
        data: { old_plan: 'team', new_plan: 'team', expires_at: iso(converted as number), amount: 30, new_balance: 10, reason: 'trial_converted' },
      });
      expect(events.slice(1)).to.deep.equal(ranOut(converted as number, 10));
    });

    it('a renewal whose append fails is tried again at a later tick, not lost, and still acts once', async () => {
      const ws = await ts.createWorkspace('free');
      await pay(ts, ws.workspaceId, 30);
      const expiry = expiryIn(1000);
      await subscribe(ts, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry) });
      const { log } = ts.service.core;
      const append = log.append.bind(log);
      let failed = 0;
      log.append = (stream, events, expected) => {
        if (stream !== `billing-${ws.workspaceId}` || failed > 0) return append(stream, events, expected);
        failed += 1;
        return Promise.reject(new Error('disk full (injected)'));
      };
      try {
        const events = await settled(ts, ws.workspaceId, 'billing.plan_downgraded');
        expect(failed).to.equal(1);
        // Retried a second later, a whole period (1 s) late: the renewed period starts from then.
        const [, renewedUntil] = expiries(events, expiry, 1000) as [number, number];
        expect(renewedUntil).to.be.at.least(expiry + 2000);
        expect(events).to.deep.equal([renewed(renewedUntil, 0), ...ranOut(renewedUntil, 0)]);
      } finally {
        log.append = append;
      }
    });

    it('a blocked workspace is billed all the same (blocking is access, not the contract)', async () => {
      const ws = await ts.createWorkspace('free');
      expect((await ts.admin('PATCH', `/admin/v1/workspaces/${ws.workspaceId}`, { blocked: true })).status).to.equal(200);
      await pay(ts, ws.workspaceId, 30);
      const expiry = expiryIn(1000);
      await subscribe(ts, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry) });
      const events = await settled(ts, ws.workspaceId, 'billing.plan_downgraded');
      const [, until] = expiries(events, expiry, 1000);
      expect(events).to.deep.equal([renewed(until as number, 0), ...ranOut(until as number, 0)]);
    });
  });

  it('across a restart, and with an expiry that passed while the service was stopped: each expiry acts once', async () => {
    const env = { BILLING_PERIOD: '2s' };
    // A data folder of the test's own: closing a service removes only the folder it made itself.
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-billing-clock-'));
    const first = await startTestService(env, { dataDir });
    try {
      const ws = await first.createWorkspace('free');
      await pay(first, ws.workspaceId, 70);
      const expiry = expiryIn(1000);
      await subscribe(first, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry) });
      const before = await settled(first, ws.workspaceId, 'billing.plan_renewed');
      const [, secondExpiry] = expiries(before, expiry, 2000) as [number, number];
      expect(before).to.deep.equal([renewed(secondExpiry, 40)]);
      await first.close();

      // The next expiry passes while no service runs: nothing happens until the next start.
      await sleep(secondExpiry + 300 - Date.now());
      const restartedMicros = Date.now() * 1000;
      const second = await startTestService(env, { dataDir });
      try {
        const events = await settled(second, ws.workspaceId, 'billing.plan_downgraded');
        // The renewal of the expiry passed while stopped was written by the second start.
        const [, late] = await second.service.core.log.readAll({ after: 0, workspaceId: ws.workspaceId, types: ['billing.plan_renewed'] });
        expect(late?.offset).to.be.above(restartedMicros);
        const due = expiries(events, expiry, 2000);
        expect(events).to.deep.equal([renewed(secondExpiry, 40), renewed(due[2] as number, 10), ...ranOut(due[2] as number, 10)]);
        // Nothing more once on the entry plan.
        await sleep(1200);
        expect(await clockEvents(second, ws.workspaceId)).to.have.length(5);
      } finally {
        await second.close();
      }
    } finally {
      await first.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a plan change whose mirror onto the workspace a crash cut off is mirrored at the next start, unless the admin set a plan since', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-billing-clock-'));
    const first = await startTestService({}, { dataDir });
    try {
      const [cut, overridden] = [await first.createWorkspace('free'), await first.createWorkspace('free')];
      const past = Date.now() - 1000;
      for (const ws of [cut, overridden]) {
        // The billing stream alone, as if the process died after its append and before the mirror.
        const command = { kind: 'subscribe', paid: { plan: 'team', price: 30 }, expiresAt: iso(past + 3_600_000), autoRenew: true, next: null, trial: false } as const;
        const set = await first.service.core.handle(billingAggregate, billingStream(ws.workspaceId), ws.workspaceId, command, undefined);
        expect(set._tag).to.equal('Right');
      }
      expect((await first.admin('PATCH', `/admin/v1/workspaces/${overridden.workspaceId}`, { plan: 'business' })).status).to.equal(200);
      await first.close();

      const second = await startTestService({}, { dataDir });
      try {
        expect(second.service.core.directory.workspace(cut.workspaceId)?.plan).to.equal('team');
        expect(second.service.core.directory.workspace(overridden.workspaceId)?.plan).to.equal('business');
        expect((await call(`${second.url}/api/v1/articles`, 'GET', cut.apiKey)).status).to.equal(200);
      } finally {
        await second.close();
      }
    } finally {
      await first.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('two API servers on one shared log, both running the clock: each expiry acts exactly once, and the one left carries on alone', async () => {
    const env = { ROLE: 'api', BILLING_PERIOD: '1s' };
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-billing-clock-'));
    const a = await startTestService(env, { dataDir });
    const b = await startTestService(env, { dataDir });
    try {
      const workspaces = await Promise.all([0, 1, 2, 3].map(() => a.createWorkspace('free')));
      // The same instant for all, so both clocks wake for the same expiries and race for them.
      const expiry = expiryIn(1500);
      for (const ws of workspaces) {
        await pay(a, ws.workspaceId, 65);
        await subscribe(a, ws.workspaceId, { plan: 'team', price: 30, expires_at: iso(expiry) });
      }
      for (const ws of workspaces) {
        const events = await settled(b, ws.workspaceId, 'billing.plan_renewed');
        expect(events).to.deep.equal([renewed(expiries(events, expiry, 1000)[1] as number, 35)]);
      }
      // A stops: B's clock (B never served a billing call) acts on the next expiries by itself.
      await a.close();
      for (const ws of workspaces) {
        const events = await settled(b, ws.workspaceId, 'billing.plan_downgraded');
        const due = expiries(events, expiry, 1000);
        expect(events).to.deep.equal([renewed(due[1] as number, 35), renewed(due[2] as number, 5), ...ranOut(due[2] as number, 5)]);
        expect(await planChanges(b, ws.workspaceId, 'free')).to.deep.equal(['team', 'free']);
      }
      await sleep(1200);
      for (const ws of workspaces) expect(await clockEvents(b, ws.workspaceId)).to.have.length(5);
    } finally {
      await Promise.all([b.close(), a.close()]);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
