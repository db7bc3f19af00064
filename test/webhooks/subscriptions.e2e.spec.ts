// Webhook management over real HTTP on the real service, with a real local receiver for the test endpoint.
import { expect } from 'chai';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { subscriptionStream } from '../../src/domain/subscription/subscription.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { runSubscriptionCommand } from '../../src/webhooks/subscriptions.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';

describe('webhook management (e2e)', () => {
  let service: TestService;
  let receiver: Receiver;
  let ws: TestWorkspace;

  before(async () => {
    service = await startTestService({ WEBHOOK_TIMEOUT_MS: '1000' });
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await service.close();
  });
  beforeEach(async () => {
    ws = await service.createWorkspace();
    receiver.respond({ kind: 'status', status: 200 });
  });

  const create = async (body: Record<string, unknown> = {}) => {
    const reply = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, ...body });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    return reply.body as { id: string; secret: string };
  };

  it('creates an active subscription and returns its secret once', async () => {
    const reply = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['ticket.created'], description: 'CRM' });
    expect(reply.status).to.equal(201);
    expect(reply.body).to.have.all.keys('id', 'url', 'events', 'secret', 'is_active', 'description', 'created_at');
    expect(reply.body).to.include({ url: receiver.url, is_active: true, description: 'CRM' });
    expect(reply.body.events).to.deep.equal(['ticket.created']);
    expect(reply.body.secret).to.be.a('string').with.length.above(30);
    expect(reply.body.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?$/);
  });

  it('defaults to all events and an empty description', async () => {
    const { id } = await create();
    const list = await ws.api('GET', '/api/v1/webhooks');
    expect(list.body.items.find((i: { id: string }) => i.id === id)).to.include({ description: '' }).and.to.have.deep.property('events', []);
  });

  it('keeps the secret out of the log in clear text', async () => {
    const { secret } = await create();
    const all = await service.service.core.log.readAll({ after: 0 });
    expect(JSON.stringify(all)).not.to.include(secret);
  });

  it('lists only the workspace subscriptions, without secret or failure counter', async () => {
    const { id } = await create();
    const other = await service.createWorkspace();
    await other.api('POST', '/api/v1/webhooks', { url: receiver.url });
    const list = await ws.api('GET', '/api/v1/webhooks');
    expect(list.status).to.equal(200);
    expect(list.body.items.map((i: { id: string }) => i.id)).to.deep.equal([id]);
    expect(list.body.items[0]).to.have.all.keys('id', 'url', 'events', 'is_active', 'description', 'created_at');
  });

  it('refuses unknown event names with 422 VALIDATION_ERROR listing unknown and valid names', async () => {
    const reply = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['ticket.created', 'ticket.exploded'] });
    expect(reply.status).to.equal(422);
    expect(reply.body).to.include({ error_code: 'VALIDATION_ERROR' });
    expect(reply.body.detail).to.deep.equal({ unknown: ['ticket.exploded'], valid: [...PUBLIC_EVENT_TYPES] });
    const { id } = await create();
    const patch = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { events: ['nope'] });
    expect(patch.status).to.equal(422);
    expect(patch.body.detail.unknown).to.deep.equal(['nope']);
  });

  it('refuses a body without url as a schema 422', async () => {
    const reply = await ws.api('POST', '/api/v1/webhooks', { events: [] });
    expect(reply.status).to.equal(422);
    expect(reply.body.detail[0]).to.include({ type: 'missing' }).and.to.have.deep.property('loc', ['body', 'url']);
  });

  it('PATCH changes only the passed fields and answers with consecutive_failures', async () => {
    const { id } = await create({ description: 'before', events: ['ticket.closed'] });
    const reply = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { description: 'after' });
    expect(reply.status).to.equal(200);
    expect(reply.body).to.include({ id, url: receiver.url, description: 'after', is_active: true, consecutive_failures: 0 });
    expect(reply.body.events).to.deep.equal(['ticket.closed']);
    expect(reply.body).not.to.have.property('secret');
  });

  it('is deactivated by the 5th failed delivery in a row; PATCH is_active true reactivates and resets', async () => {
    const { id } = await create();
    const core = service.service.core;
    for (const deliveryId of ['d1', 'd2', 'd3', 'd4', 'd5']) {
      const result = await runSubscriptionCommand(core, ws.workspaceId, id, { kind: 'record_delivery_failed', deliveryId, round: 1 }, undefined);
      expect(result._tag).to.equal('Right');
    }
    const off = await ws.api('PATCH', `/api/v1/webhooks/${id}`, {});
    expect(off.body).to.include({ is_active: false, consecutive_failures: 5 });
    const on = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { is_active: true });
    expect(on.body).to.include({ is_active: true, consecutive_failures: 0 });
    const list = await ws.api('GET', '/api/v1/webhooks');
    expect(list.body.items[0]).to.include({ is_active: true });
  });

  it('answers 404 in the short form for a missing or another workspace subscription', async () => {
    const other = await service.createWorkspace();
    const foreign = (await other.api('POST', '/api/v1/webhooks', { url: receiver.url })).body.id as string;
    for (const id of ['0123456789abcdef0123456789abcdef', foreign]) {
      for (const [method, path] of [['PATCH', `/api/v1/webhooks/${id}`], ['DELETE', `/api/v1/webhooks/${id}`], ['POST', `/api/v1/webhooks/${id}/test`]] as const) {
        const reply = await ws.api(method, path, method === 'PATCH' ? { description: 'x' } : undefined);
        expect(reply.status, `${method} ${path}`).to.equal(404);
        expect(reply.body).to.deep.equal({ detail: 'Webhook not found' });
      }
    }
    const still = await other.api('GET', '/api/v1/webhooks');
    expect(still.body.items).to.have.length(1);
  });

  it('DELETE answers 204, removes the subscription and its stream', async () => {
    const { id } = await create();
    const reply = await ws.api('DELETE', `/api/v1/webhooks/${id}`);
    expect(reply.status).to.equal(204);
    expect(reply.body).to.equal('');
    expect((await ws.api('GET', '/api/v1/webhooks')).body.items).to.deep.equal([]);
    expect(await service.service.core.log.readStream(subscriptionStream(id))).to.deep.equal([]);
    expect((await ws.api('DELETE', `/api/v1/webhooks/${id}`)).status).to.equal(404);
  });

  describe('POST /webhooks/{id}/test', () => {
    it('sends one signed webhook.test envelope and reports the result', async () => {
      const { id, secret } = await create({ events: ['ticket.created'] });
      const before = receiver.requests.length;
      const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
      expect(reply.status).to.equal(200);
      expect(reply.body).to.have.all.keys('delivered', 'status_code', 'error', 'latency_ms', 'delivery_id', 'signature_header');
      expect(reply.body).to.include({ delivered: true, status_code: 200, error: null });
      expect(reply.body.latency_ms).to.be.a('number');
      expect(Number.isInteger(reply.body.latency_ms)).to.equal(true);
      const received = receiver.requests.slice(before);
      expect(received).to.have.length(1);
      const [request] = received;
      expect(request?.headers).to.include({
        'content-type': 'application/json',
        'x-webhook-event': 'webhook.test',
        'x-webhook-id': reply.body.delivery_id,
        'x-webhook-attempt': '1',
        'x-webhook-signature': reply.body.signature_header,
      });
      expect(verifySignature(secret, request?.body ?? Buffer.alloc(0), reply.body.signature_header)).to.equal(true);
      const envelope = JSON.parse(request?.body.toString('utf8') ?? '{}');
      expect(envelope).to.have.all.keys('id', 'type', 'timestamp', 'workspace_id', 'data', '_links');
      expect(envelope).to.include({ type: 'webhook.test', workspace_id: ws.workspaceId });
      expect(envelope.id).to.match(/^[0-9a-f]{32}$/);
      expect(envelope.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
      expect(envelope.data).to.include({ webhook_id: id });
      expect(envelope._links).to.deep.equal({});
    });

    it('works for an inactive subscription, reports failures, and leaves the counter and the feed alone', async () => {
      const { id } = await create();
      await ws.api('PATCH', `/api/v1/webhooks/${id}`, { is_active: false });
      receiver.respond({ kind: 'status', status: 503 });
      const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
      expect(reply.status).to.equal(200);
      expect(reply.body).to.include({ delivered: false, status_code: 503, error: 'HTTP 503' });
      const after = await ws.api('PATCH', `/api/v1/webhooks/${id}`, {});
      expect(after.body).to.include({ is_active: false, consecutive_failures: 0 });
      const feed = await service.service.core.log.readFeed({ workspaceId: ws.workspaceId, fromOffset: 0, limit: 100 });
      expect(feed).to.deep.equal([]);
    });

    it('reports an unreachable target with status_code null and an error', async () => {
      const { id } = await create();
      await ws.api('PATCH', `/api/v1/webhooks/${id}`, { url: 'http://169.254.169.254/latest/meta-data' });
      const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
      expect(reply.body).to.include({ delivered: false, status_code: null });
      expect(reply.body.error).to.match(/blocked address/);
    });
  });
});

describe('webhook subscriptions across a restart (e2e)', () => {
  it('rebuilds the read model from the log and still opens the secret with the stored server key', async () => {
    const first = await startTestService();
    const receiver = await startReceiver();
    const dataDir = first.dataDir;
    try {
      const ws = await first.createWorkspace();
      const created = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, description: 'kept' });
      await first.service.close(); // the data folder stays until first.close()
      const second = await startTestService({}, { dataDir });
      try {
        const again = (method: string, p: string) => call(`${second.url}${p}`, method, ws.apiKey);
        const list = await again('GET', '/api/v1/webhooks');
        expect(list.body.items).to.have.length(1);
        expect(list.body.items[0]).to.include({ id: created.body.id, description: 'kept' });
        const test = await again('POST', `/api/v1/webhooks/${created.body.id}/test`);
        expect(test.body).to.include({ delivered: true });
        const [request] = receiver.requests;
        expect(verifySignature(created.body.secret, request?.body ?? Buffer.alloc(0), request?.headers['x-webhook-signature'] as string)).to.equal(true);
      } finally {
        await second.close();
      }
    } finally {
      await receiver.close();
      await first.close();
    }
  });
});
