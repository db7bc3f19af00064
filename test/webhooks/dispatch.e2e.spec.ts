// The delivery engine end to end: the real service on its SQLite log, real local receivers, the
// retry schedule shrunk to milliseconds through WEBHOOK_RETRY_DELAYS.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { deliveryIdOf, deliveryStream } from '../../src/domain/delivery/ids.js';
import { toEnvelope } from '../../src/domain/envelope.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { FAST_RETRIES, emit, eventIdOf, eventually, header, requestsFor, settle, subscribe } from '../support/webhooks-dispatch.js';

const SLOW_RETRIES = { WEBHOOK_RETRY_DELAYS: '400ms,400ms,400ms,400ms,400ms' };

describe('webhook delivery (e2e)', () => {
  let receivers: Receiver[] = [];
  let services: TestService[] = [];
  let test: TestService;
  let ws: TestWorkspace;

  const receiver = async (): Promise<Receiver> => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };

  const start = async (env: Record<string, string> = FAST_RETRIES, dataDir?: string): Promise<void> => {
    test = await startTestService(env, dataDir === undefined ? {} : { dataDir });
    services.push(test);
  };

  const startWithWorkspace = async (env?: Record<string, string>): Promise<void> => {
    await start(env);
    ws = await test.createWorkspace();
  };

  const consecutiveFailures = async (id: string): Promise<number> => {
    const patched = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { description: 'probe' });
    expect(patched.status).to.equal(200);
    return Number(patched.body.consecutive_failures);
  };

  const isActive = async (id: string): Promise<boolean> => {
    const list = await ws.api('GET', '/api/v1/webhooks');
    return Boolean((list.body.items as { id: string; is_active: boolean }[]).find((s) => s.id === id)?.is_active);
  };

  const deliveries = async (id: string) => {
    const reply = await ws.api('GET', `/api/v1/webhooks/${id}/deliveries`);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body.items as { id: string; status: string; round: number; attempt: number; attempts: { attempt: number; status_code: number | null; error: string | null }[] }[];
  };

  /** A subscription whose receiver answers 500, and one event's delivery once all 6 attempts failed. */
  const failedDelivery = async () => {
    const hook = await receiver();
    hook.respond({ kind: 'status', status: 500 });
    const sub = await subscribe(ws, hook.url);
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(6);
    const [delivery] = await eventually('the delivery failed', async () => {
      const items = await deliveries(sub.id);
      return items[0]?.status === 'failed' && items;
    });
    return { hook, sub, delivery };
  };

  afterEach(async () => {
    // Receivers first: they drop hanging connections, so attempts in flight end at once.
    await Promise.all(receivers.map((r) => r.close()));
    for (const s of services) await s.close();
    receivers = [];
    services = [];
  });

  it('signs and sends the exact envelope bytes with the contract headers', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    const sub = await subscribe(ws, hook.url);
    const event = await emit(test, ws.workspaceId);
    const [request] = await hook.waitForRequests(1);
    if (request === undefined) throw new Error('no request');
    expect(request.method).to.equal('POST');
    expect(verifySignature(sub.secret, request.body, header(request, 'x-webhook-signature'))).to.equal(true);
    expect(header(request, 'x-webhook-signature')).to.match(/^sha256=[0-9a-f]{64}$/);
    expect(header(request, 'content-type')).to.equal('application/json');
    expect(header(request, 'x-webhook-event')).to.equal('ticket.updated');
    expect(header(request, 'x-webhook-id')).to.equal(deliveryIdOf(event.id, sub.id)).and.match(/^[0-9a-f]{32}$/);
    expect(header(request, 'x-webhook-attempt')).to.equal('1');
    expect(request.body.equals(Buffer.from(JSON.stringify(toEnvelope(event))))).to.equal(true);
    const body = JSON.parse(request.body.toString('utf8'));
    expect(body).to.include({ id: event.id, type: 'ticket.updated', workspace_id: ws.workspaceId });
    expect(body.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
    expect(body._links).to.have.keys('ticket', 'messages');
  });

  it('sends one delivery per subscription: the same event id, its own X-Webhook-Id and signature', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    const first = await subscribe(ws, hook.url);
    const second = await subscribe(ws, hook.url);
    const event = await emit(test, ws.workspaceId);
    const requests = await hook.waitForRequests(2);
    expect(requests.map(eventIdOf)).to.deep.equal([event.id, event.id]);
    const bySub = [first, second].map((sub) => requests.find((r) => header(r, 'x-webhook-id') === deliveryIdOf(event.id, sub.id)));
    bySub.forEach((request, i) => {
      const sub = [first, second][i] as { secret: string };
      expect(request !== undefined && verifySignature(sub.secret, request.body, header(request, 'x-webhook-signature'))).to.equal(true);
    });
  });

  it('retries failures (5xx, reset, 3xx) with the same id and bytes, after the configured delays', async () => {
    await startWithWorkspace({ WEBHOOK_RETRY_DELAYS: '30ms,60ms,90ms,120ms,150ms' });
    const hook = await receiver();
    const sub = await subscribe(ws, hook.url);
    hook.respondOnce({ kind: 'status', status: 500 }, { kind: 'reset' }, { kind: 'redirect', location: 'http://127.0.0.1:1/elsewhere' });
    const arrivals: number[] = [];
    hook.respond(() => {
      arrivals.push(performance.now());
      return { kind: 'status', status: 200 };
    });
    await emit(test, ws.workspaceId);
    const requests = await hook.waitForRequests(4);
    expect(requests.map((r) => header(r, 'x-webhook-attempt'))).to.deep.equal(['1', '2', '3', '4']);
    expect(new Set(requests.map((r) => header(r, 'x-webhook-id'))).size).to.equal(1);
    requests.forEach((r) => expect(r.body.equals((requests[0] as { body: Buffer }).body)).to.equal(true));
    const [delivery] = await eventually('the delivery recorded as delivered', async () => {
      const items = await deliveries(sub.id);
      return items[0]?.status === 'delivered' && items;
    });
    expect(delivery?.attempts.map((a) => a.status_code)).to.deep.equal([500, null, 302, 200]);
    expect(delivery?.attempts[2]?.error).to.match(/redirect/);
    expect(delivery?.id).to.equal(header(requests[0] as never, 'x-webhook-id'));
  });

  it('waits at least each configured delay between attempts', async () => {
    await startWithWorkspace({ WEBHOOK_RETRY_DELAYS: '40ms,80ms,120ms,160ms,200ms' });
    const hook = await receiver();
    await subscribe(ws, hook.url);
    const arrivals: number[] = [];
    hook.respond(() => {
      arrivals.push(performance.now());
      return { kind: 'status', status: 503 };
    });
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(6);
    const gaps = arrivals.slice(1).map((t, i) => t - (arrivals[i] as number));
    gaps.forEach((gap, i) => expect(gap).to.be.at.least([40, 80, 120, 160, 200][i] as number));
  });

  it('ends failed after 6 attempts, counting one failed delivery on the subscription', async () => {
    await startWithWorkspace();
    const { hook, sub, delivery } = await failedDelivery();
    expect(delivery?.attempts.map((a) => a.attempt)).to.deep.equal([1, 2, 3, 4, 5, 6]);
    await settle(150);
    expect(hook.requests.length).to.equal(6);
    expect(await consecutiveFailures(sub.id)).to.equal(1);
    expect(await isActive(sub.id)).to.equal(true);
  });

  it('deactivates at exactly the 5th failed delivery in a row; PATCH is_active re-activates and resets the count', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    hook.respond({ kind: 'status', status: 500 });
    const sub = await subscribe(ws, hook.url);
    for (let n = 1; n <= 4; n++) {
      await emit(test, ws.workspaceId);
      await hook.waitForRequests(6 * n);
      await eventually(`${n} failures counted`, async () => (await consecutiveFailures(sub.id)) === n);
      expect(await isActive(sub.id)).to.equal(true);
    }
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(30);
    await eventually('deactivation', async () => !(await isActive(sub.id)));
    expect(await consecutiveFailures(sub.id)).to.equal(5);

    const ignored = await emit(test, ws.workspaceId);
    await settle(200);
    expect(hook.requests.length).to.equal(30);
    expect(requestsFor(hook.requests, ignored.id)).to.deep.equal([]);

    const patched = await ws.api('PATCH', `/api/v1/webhooks/${sub.id}`, { is_active: true });
    expect(patched.body).to.include({ is_active: true, consecutive_failures: 0 });
    hook.respond({ kind: 'status', status: 200 });
    const next = await emit(test, ws.workspaceId);
    await eventually('delivery after re-activation', () => requestsFor(hook.requests, next.id).length === 1);
  });

  it('resets the failure count on any successful delivery', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    hook.respond({ kind: 'status', status: 500 });
    const sub = await subscribe(ws, hook.url);
    await emit(test, ws.workspaceId);
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(12);
    await eventually('2 failures counted', async () => (await consecutiveFailures(sub.id)) === 2);
    hook.respond({ kind: 'status', status: 204 });
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(13);
    await eventually('the count reset', async () => (await consecutiveFailures(sub.id)) === 0);
  });

  /** A delivery whose attempt 1 failed and is recorded, its retry scheduled (slowly). */
  const retryWaiting = async () => {
    await startWithWorkspace(SLOW_RETRIES);
    const hook = await receiver();
    hook.respond({ kind: 'status', status: 500 });
    const sub = await subscribe(ws, hook.url);
    await emit(test, ws.workspaceId);
    await hook.waitForRequests(1);
    await eventually('attempt 1 recorded', async () => (await deliveries(sub.id))[0]?.attempt === 1);
    return { hook, sub };
  };

  it('sends no scheduled retry once the subscription is deactivated, even if re-activated later', async () => {
    const { hook, sub } = await retryWaiting();
    expect((await ws.api('PATCH', `/api/v1/webhooks/${sub.id}`, { is_active: false })).status).to.equal(200);
    await eventually('the delivery cancelled', async () => (await deliveries(sub.id))[0]?.status === 'cancelled');
    expect((await ws.api('PATCH', `/api/v1/webhooks/${sub.id}`, { is_active: true })).status).to.equal(200);
    await settle(700);
    expect(hook.requests.length).to.equal(1);
  });

  it('DELETE cancels scheduled retries and deletes the delivery history', async () => {
    const { hook, sub } = await retryWaiting();
    expect((await ws.api('DELETE', `/api/v1/webhooks/${sub.id}`)).status).to.equal(204);
    await eventually('history deleted', async () => (await test.service.core.log.readStream(deliveryStream(sub.id))).length === 0);
    expect((await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries`)).status).to.equal(404);
    await settle(700);
    expect(hook.requests.length).to.equal(1);
    expect(await test.service.core.log.readStream(deliveryStream(sub.id))).to.deep.equal([]);
  });

  it('delivers only the subscribed types', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    await subscribe(ws, hook.url, ['ticket.created']);
    const created = (id: string) => ({ type: 'ticket.created' as const, data: { ticket_id: id, status: 'new' as const, priority: 'normal' as const, contact_id: 'c1', subject: null } });
    const first = await emit(test, ws.workspaceId, created('t1'));
    const skipped = await emit(test, ws.workspaceId);
    const last = await emit(test, ws.workspaceId, created('t2'));
    await eventually('both ticket.created', () => requestsFor(hook.requests, last.id).length === 1 && requestsFor(hook.requests, first.id).length === 1);
    await settle(100);
    expect(hook.requests.map((r) => header(r, 'x-webhook-event'))).to.deep.equal(['ticket.created', 'ticket.created']);
    expect(requestsFor(hook.requests, skipped.id)).to.deep.equal([]);
  });

  it('delivers only events appended after the subscription was created', async () => {
    await startWithWorkspace();
    const hook = await receiver();
    const before = await emit(test, ws.workspaceId);
    await subscribe(ws, hook.url);
    const after = await emit(test, ws.workspaceId);
    await eventually('the later event', () => requestsFor(hook.requests, after.id).length === 1);
    await settle(100);
    expect(requestsFor(hook.requests, before.id)).to.deep.equal([]);
  });

  it('does not let an endpoint that never answers hold back another subscription', async () => {
    await startWithWorkspace({ ...FAST_RETRIES, WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION: '2', WEBHOOK_TIMEOUT_MS: '5000' });
    const dead = await receiver();
    dead.respond({ kind: 'hang' });
    const live = await receiver();
    await subscribe(ws, dead.url);
    await subscribe(ws, live.url);
    for (let i = 0; i < 10; i++) await emit(test, ws.workspaceId);
    await live.waitForRequests(10);
    expect(dead.requests.length).to.equal(2);
  });

  it('does not let one workspace with hanging endpoints take the in-flight slots of another', async () => {
    await startWithWorkspace({ ...FAST_RETRIES, WEBHOOK_MAX_IN_FLIGHT: '4', WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '2', WEBHOOK_TIMEOUT_MS: '3000' });
    const dead = await receiver();
    dead.respond({ kind: 'hang' });
    for (let i = 0; i < 4; i++) await subscribe(ws, dead.url);
    for (let i = 0; i < 3; i++) await emit(test, ws.workspaceId);
    await dead.waitForRequests(2);
    const other = await test.createWorkspace();
    const live = await receiver();
    await subscribe(other, live.url);
    const sent = Date.now();
    await emit(test, other.workspaceId);
    await live.waitForRequests(1);
    // Without the workspace limit the hanging attempts hold all 4 slots until their 3 s timeout.
    expect(Date.now() - sent).to.be.below(1000);
    expect(dead.requests).to.have.length(2);
    // The workspace's other deliveries wait their turn, not dropped: the next go out as the hanging ones time out.
    await eventually('the next attempts to the hanging endpoint', () => dead.requests.length === 4, 5000);
  });

  it('retries a failed delivery on request: a new round from attempt 1 with the same id', async () => {
    await startWithWorkspace();
    const { hook, sub, delivery: failed } = await failedDelivery();
    const id = String(failed?.id);
    hook.respond({ kind: 'status', status: 200 });
    const retried = await ws.api('POST', `/api/v1/webhooks/${sub.id}/deliveries/${id}/retry`);
    expect(retried.status).to.equal(202);
    expect(retried.body).to.include({ id, status: 'waiting', round: 2, attempt: 0 });
    const [, , , , , , again] = await hook.waitForRequests(7);
    expect(again && header(again, 'x-webhook-id')).to.equal(id);
    expect(again && header(again, 'x-webhook-attempt')).to.equal('1');
    await eventually('delivered in round 2', async () => (await deliveries(sub.id))[0]?.status === 'delivered');
    // Any successful delivery resets the run of failures, a retried one too.
    await eventually('the failure count reset by the retry', async () => (await consecutiveFailures(sub.id)) === 0);
    const refused = await ws.api('POST', `/api/v1/webhooks/${sub.id}/deliveries/${id}/retry`);
    expect(refused.status).to.equal(409);
    expect(refused.body.error_code).to.equal('CONFLICT');
    expect((await ws.api('POST', `/api/v1/webhooks/${sub.id}/deliveries/${'0'.repeat(32)}/retry`)).status).to.equal(404);
    expect((await ws.api('GET', `/api/v1/webhooks/${'0'.repeat(32)}/deliveries`)).status).to.equal(404);
  });

  it('resumes a retry schedule after a restart on the same data, without repeating an attempt', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-'));
    try {
      const env = { WEBHOOK_RETRY_DELAYS: '150ms,150ms,150ms,150ms,150ms' };
      await start(env, dataDir);
      ws = await test.createWorkspace();
      const hook = await receiver();
      hook.respond({ kind: 'status', status: 500 });
      const sub = await subscribe(ws, hook.url);
      const event = await emit(test, ws.workspaceId);
      await hook.waitForRequests(2);
      await test.close();
      services = [];
      const seenBeforeRestart = hook.requests.length;

      await start(env, dataDir);
      const { apiKey } = ws;
      ws = { ...ws, api: (method, p, body, headers) => call(`${test.url}${p}`, method, apiKey, body, headers) };
      const requests = await hook.waitForRequests(6);
      expect(seenBeforeRestart).to.be.within(2, 5);
      expect(requests.map((r) => header(r, 'x-webhook-attempt'))).to.deep.equal(['1', '2', '3', '4', '5', '6']);
      requests.forEach((r) => {
        expect(header(r, 'x-webhook-id')).to.equal(deliveryIdOf(event.id, sub.id));
        expect(r.body.equals((requests[0] as { body: Buffer }).body)).to.equal(true);
        expect(verifySignature(sub.secret, r.body, header(r, 'x-webhook-signature'))).to.equal(true);
      });
      await eventually('the delivery failed after the restart', async () => (await deliveries(sub.id))[0]?.status === 'failed');
      await settle(300);
      expect(hook.requests.length).to.equal(6);
    } finally {
      await Promise.all(receivers.map((r) => r.close()));
      for (const s of services) await s.close();
      receivers = [];
      services = [];
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
