// The API document end to end: served without a key, valid for a maintained third-party OpenAPI 3.1
// validator, one operation per registered public route (no more, no fewer), and real answers of a
// running server (successes, the three error formats, the headers each carries) and real deliveries
// valid against it (ajv, test/support/openapi-conformance.ts).
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { conformanceOf, type ApiDocument, type Conformance } from '../support/openapi-conformance.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';

describe('OpenAPI document (e2e)', () => {
  let test: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;
  let doc: ApiDocument;
  let check: Conformance;
  const conforms = (method: string, path: string, reply: Reply): Reply => check.conforms(method, path, reply);

  before(async () => {
    test = await startTestService({ PLANS: 'free:100:false,pro:1000:true' });
    ws = await test.createWorkspace('pro');
    receiver = await startReceiver();
    check = await conformanceOf(test.url);
    doc = check.doc;
  });
  after(async () => {
    await receiver.close();
    await test.close();
  });

  it('is served without a key and passes a third-party OpenAPI 3.1 validator', async () => {
    const validator = new Validator();
    const result = await validator.validate(doc as unknown as Parameters<Validator['validate']>[0]);
    expect(result, JSON.stringify(result.errors)).to.deep.include({ valid: true });
    expect(validator.version).to.equal('3.1');
  });

  it('a broken document fails the same validator', async () => {
    const broken = { ...doc, paths: { '/x': { get: { responses: { 200: { content: 'not an object' } } } } } };
    expect((await new Validator().validate(broken as unknown as Parameters<Validator['validate']>[0])).valid).to.equal(false);
  });

  it('describes exactly the routes the server registered under /api/v1', () => {
    const registered = test.service.routes
      .filter((r) => r.path.startsWith('/api/v1/'))
      .flatMap((r) => r.methods.filter((m) => m !== 'HEAD').map((m) => `${m.toLowerCase()} ${r.path.slice('/api/v1'.length).replace(/:(\w+)/g, '{$1}')}`));
    const described = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`));
    expect([...described].sort()).to.deep.equal([...new Set(registered)].sort());
  });

  it('has one webhook per catalogue event, and webhook.test', () => {
    expect(Object.keys(doc.webhooks)).to.deep.equal([...PUBLIC_EVENT_TYPES, 'webhook.test']);
  });

  it('GET /event-types: the subscribable names in catalogue order, each data schema usable by ajv; no key needed', async () => {
    const reply = conforms('get', '/event-types', await call(`${test.url}/api/v1/event-types`, 'GET', null));
    expect(reply.body.items.map((i: { name: string }) => i.name)).to.deep.equal([...PUBLIC_EVENT_TYPES]);
    const created = reply.body.items.find((i: { name: string }) => i.name === 'ticket.created').schema;
    const check = new Ajv2020({ strict: false }).compile(created);
    expect(check({ ticket_id: 't', status: 'new', priority: 'normal', contact_id: 'c', subject: null })).to.equal(true);
    expect(check({ ticket_id: 't', status: 'bogus', priority: 'normal', contact_id: 'c', subject: null })).to.equal(false);
    expect(check({ ticket_id: 't', status: 'new', priority: 'normal', subject: null })).to.equal(false);
  });

  it('real answers of tickets, messages and contacts fit it, errors in their three formats included', async () => {
    const opened = conforms('post', '/tickets', await ws.api('POST', '/api/v1/tickets', { subject: 'Hi', contact: { email: 'a@example.test', full_name: 'A' }, message: 'hello' }));
    expect(opened.status).to.equal(201);
    const id = String(opened.body.id);
    conforms('get', '/tickets', await ws.api('GET', '/api/v1/tickets?page_size=5'));
    conforms('get', '/tickets/{id}', await ws.api('GET', `/api/v1/tickets/${id}`));
    conforms('patch', '/tickets/{id}', await ws.api('PATCH', `/api/v1/tickets/${id}`, { priority: 'high' }));
    conforms('post', '/tickets/{id}/messages', await ws.api('POST', `/api/v1/tickets/${id}/messages`, { content: 'from the bot' }));
    conforms('get', '/tickets/{id}/messages', await ws.api('GET', `/api/v1/tickets/${id}/messages`));
    conforms('post', '/messages', await ws.api('POST', '/api/v1/messages', { content: 'again', ticket_id: id }));
    conforms('post', '/tickets/{id}/close', await ws.api('POST', `/api/v1/tickets/${id}/close`));
    expect(conforms('post', '/tickets/{id}/close', await ws.api('POST', `/api/v1/tickets/${id}/close`)).status).to.equal(409);
    const contact = conforms('post', '/contacts', await ws.api('POST', '/api/v1/contacts', { telegram_id: 42 }));
    conforms('get', '/contacts/{id}', await ws.api('GET', `/api/v1/contacts/${contact.body.id}`));
    expect(conforms('get', '/tickets/{id}', await ws.api('GET', '/api/v1/tickets/nope')).status).to.equal(404);
    expect(conforms('post', '/tickets', await ws.api('POST', '/api/v1/tickets', { contact: {} })).status).to.equal(400);
    expect(conforms('post', '/tickets', await ws.api('POST', '/api/v1/tickets', { contact: { email: 'b@example.test' }, priority: 'urgent', extra: 1 })).status).to.equal(422);
    expect(conforms('get', '/tickets', await call(`${test.url}/api/v1/tickets`, 'GET', 'not-a-key')).status).to.equal(401);
    conforms('get', '/updates', await ws.api('GET', '/api/v1/updates?timeout=0&types=ticket.created,message.created'));
    conforms('post', '/articles', await ws.api('POST', '/api/v1/articles', { title: 'T', body: 'B' }));
  });

  it('real answers of the webhook routes fit it, and so do the deliveries they send', async () => {
    const created = conforms('post', '/webhooks', await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['ticket.created'] }));
    const id = String(created.body.id);
    conforms('get', '/webhooks', await ws.api('GET', '/api/v1/webhooks'));
    conforms('patch', '/webhooks/{webhook_id}', await ws.api('PATCH', `/api/v1/webhooks/${id}`, { description: 'd' }));
    expect(conforms('patch', '/webhooks/{webhook_id}', await ws.api('PATCH', '/api/v1/webhooks/nope', { description: 'd' })).status).to.equal(404);
    expect(conforms('post', '/webhooks', await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['no.such'] })).status).to.equal(422);
    conforms('post', '/webhooks/{webhook_id}/test', await ws.api('POST', `/api/v1/webhooks/${id}/test`));
    await ws.api('POST', '/api/v1/tickets', { contact: { email: 'c@example.test' } });
    const [test, event] = await receiver.waitForRequests(2);
    for (const request of [test, event].map((r) => r as ReceivedRequest)) {
      expect(check.deliveryProblems(request)).to.equal('');
      const body = JSON.parse(request.body.toString('utf8')) as { type: string };
      // Another event's name on this event's headers and data; a header taken away; one added.
      expect(check.deliveryProblems({ ...request, body: Buffer.from(JSON.stringify({ ...body, type: 'ticket.closed' })) })).to.match(/x-webhook-event/);
      const { 'x-webhook-signature': _, ...unsigned } = request.headers;
      expect(check.deliveryProblems({ ...request, headers: unsigned })).to.match(/x-webhook-signature missing/);
      expect(check.deliveryProblems({ ...request, headers: { ...request.headers, 'x-webhook-trace': '1' } })).to.match(/x-webhook-trace not documented/);
    }
    conforms('get', '/webhooks/{webhook_id}/deliveries', await ws.api('GET', `/api/v1/webhooks/${id}/deliveries`));
    expect(conforms('delete', '/webhooks/{webhook_id}', await ws.api('DELETE', `/api/v1/webhooks/${id}`)).status).to.equal(204);
  });

  it('every POST documents what its Idempotency-Key may draw, body or none, and the upload its 422 of a wrong content type', async () => {
    const opened = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'd@example.test' } });
    const close = (key: string) => ws.api('POST', `/api/v1/tickets/${opened.body.id}/close`, undefined, { 'idempotency-key': key });
    expect(conforms('post', '/tickets/{id}/close', await close('close-1')).status).to.equal(200);
    const reused = await ws.api('POST', `/api/v1/tickets/${opened.body.id}/reopen`, undefined, { 'idempotency-key': 'close-1' });
    expect(conforms('post', '/tickets/{id}/reopen', reused).body.error_code).to.equal('IDEMPOTENCY_KEY_REUSED');
    expect(conforms('post', '/tickets/{id}/close', await close('')).status).to.equal(422);
    const { parameters } = doc.paths['/tickets/{id}/close']?.['post'] as unknown as { parameters: { name: string; schema: { pattern: string } }[] };
    const pattern = new RegExp(parameters.find((p) => p.name === 'Idempotency-Key')?.schema.pattern ?? '');
    expect(['close-1', 'a'.repeat(255)].map((k) => pattern.test(k))).to.deep.equal([true, true]);
    expect(['', 'has space', 'a'.repeat(256), 'é'].map((k) => pattern.test(k))).to.deep.equal([false, false, false, false]);
    expect(conforms('post', '/media/upload', await ws.api('POST', '/api/v1/media/upload', { file: 'not multipart' })).status).to.equal(422);
  });

  it('answers carry the headers the document gives them: a replay, a file, a rate limit, maintenance', async () => {
    const opened = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'e@example.test' } });
    const message = () => ws.api('POST', `/api/v1/tickets/${opened.body.id}/messages`, { content: 'once' }, { 'idempotency-key': 'message-1' });
    expect(conforms('post', '/tickets/{id}/messages', await message()).headers.get('idempotent-replayed')).to.equal(null);
    expect(conforms('post', '/tickets/{id}/messages', await message()).headers.get('idempotent-replayed')).to.equal('true');
    expect(conforms('get', '/updates', await ws.api('GET', '/api/v1/updates?timeout=0')).headers.get('cache-control')).to.equal('no-store');

    const form = new FormData();
    form.append('file', new Blob(['<script>1</script>'], { type: 'text/html' }), 'page.html');
    const uploaded = await fetch(`${test.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}` }, body: form });
    const file = conforms('post', '/media/upload', { status: uploaded.status, headers: uploaded.headers, body: await uploaded.json() });
    const served = conforms('get', '/media/{media_id}', await ws.api('GET', `/api/v1/media/${file.body.id}`));
    expect(served.headers.get('content-disposition')).to.match(/^attachment/);

    const limited = await startTestService({ RATE_LIMIT_PER_IP: '1' });
    const closed = await startTestService({ MAINTENANCE_MODE: 'true' });
    try {
      expect(conforms('get', '/tickets', await call(`${limited.url}/api/v1/tickets`, 'GET', 'not-a-key')).status).to.equal(401);
      expect(conforms('get', '/tickets', await call(`${limited.url}/api/v1/tickets`, 'GET', 'not-a-key')).headers.get('retry-after')).to.match(/^\d+$/);
      expect(conforms('post', '/tickets', await call(`${closed.url}/api/v1/tickets`, 'POST', 'any', {})).headers.get('retry-after')).to.equal('60');
    } finally {
      await limited.close();
      await closed.close();
    }
  });

  it('the check refuses an answer that breaks the document, in its body or its headers', () => {
    const headers = (more: Record<string, string> = {}) => new Headers({ 'x-request-id': 'r-1', 'content-type': 'application/json', ...more });
    const item = { id: 'e', type: 'ticket.closed', timestamp: 't', workspace_id: 'w', data: { ticket_id: 't', closed_at: 'c', resolution_secs: 5 }, _links: {}, offset: 1 };
    const page = (items: unknown[]) => ({ status: 200, headers: headers({ 'cache-control': 'no-store' }), body: { items, next_offset: 2 } });
    expect(check.problems('get', '/updates', page([item]))).to.equal('');
    // An event's data under another event's name, and a name outside the catalogue.
    expect(check.problems('get', '/updates', page([{ ...item, type: 'ticket.created' }]))).to.not.equal('');
    expect(check.problems('get', '/updates', page([{ ...item, type: 'ticket.exploded' }]))).to.not.equal('');
    expect(check.problems('get', '/updates', { ...page([]), headers: headers() })).to.match(/cache-control missing/);
    expect(check.problems('get', '/updates', { ...page([]), headers: headers({ 'cache-control': 'no-store', 'x-ratelimit-remaining': '9' }) })).to.match(/x-ratelimit-remaining not documented/);
    expect(check.problems('get', '/tickets', { status: 429, headers: headers({ 'retry-after': 'soon' }), body: { error_code: 'RATE_LIMIT_EXCEEDED', error_message: 'm', detail: null, request_id: 'r-1' } })).to.match(/retry-after/);
    expect(check.problems('get', '/tickets/{id}', { status: 404, headers: headers(), body: { detail: 'Ticket not found' } })).to.not.equal('');
    expect(check.problems('patch', '/webhooks/{webhook_id}', { status: 404, headers: headers(), body: { detail: 'Webhook not found' } })).to.equal('');
    expect(check.problems('patch', '/webhooks/{webhook_id}', { status: 404, headers: new Headers(), body: { detail: 'Webhook not found' } })).to.match(/x-request-id missing/);
    expect(check.problems('get', '/webhooks', { status: 200, headers: headers(), body: { items: [{ id: 'x' }] } })).to.not.equal('');
    expect(check.problems('get', '/webhooks', { status: 418, headers: headers(), body: {} })).to.equal(null);
  });
});
