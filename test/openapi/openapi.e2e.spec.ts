// The API document end to end: served without a key, valid for a maintained third-party OpenAPI 3.1
// validator, one operation per registered public route (no more, no fewer), and real answers of a
// running server (successes and the three error formats) and real deliveries valid against it (ajv).
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { subscribe } from '../support/webhooks-dispatch.js';

type Doc = { paths: Record<string, Record<string, { responses: Record<string, unknown> }>>; webhooks: Record<string, unknown> };

const pointer = (...parts: string[]): string => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

describe('OpenAPI document (e2e)', () => {
  let test: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;
  let doc: Doc;
  let ajv: Ajv2020;

  /** The errors ajv finds in `body` against the document's schema of that answer; null when the document has no such answer. */
  const problems = (method: string, path: string, status: number, body: unknown): string | null => {
    const answer = doc.paths[path]?.[method]?.responses[String(status)] as { content?: Record<string, unknown> } | undefined;
    if (answer === undefined) return null;
    if (answer.content === undefined) return body === '' ? '' : 'a body where the document has none';
    const valid = ajv.validate({ $ref: `api#/${pointer('paths', path, method, 'responses', String(status), 'content', 'application/json', 'schema')}` }, body);
    return valid ? '' : ajv.errorsText();
  };

  /** The real answer is one the document describes, and its body fits the schema. */
  const conforms = (method: string, path: string, reply: Reply): Reply => {
    const found = problems(method, path, reply.status, reply.body);
    expect(found, `${method} ${path} ${reply.status} ${JSON.stringify(reply.body)}`).to.equal('');
    return reply;
  };

  before(async () => {
    test = await startTestService({ PLANS: 'free:100:false,pro:1000:true' });
    ws = await test.createWorkspace('pro');
    receiver = await startReceiver();
    const served = await call(`${test.url}/api/v1/openapi.json`, 'GET', null);
    expect(served.status).to.equal(200);
    doc = served.body as Doc;
    ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema({ ...doc, $id: 'api' });
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
    for (const request of [test, event]) {
      const body = JSON.parse(request?.body.toString('utf8') ?? '{}') as { type: string };
      const schema = `api#/${pointer('webhooks', body.type, 'post', 'requestBody', 'content', 'application/json', 'schema')}`;
      expect(ajv.validate({ $ref: schema }, body), ajv.errorsText()).to.equal(true);
      expect(ajv.validate({ $ref: schema }, { ...body, type: 'ticket.updated' })).to.equal(false);
    }
    conforms('get', '/webhooks/{webhookId}/deliveries', await ws.api('GET', `/api/v1/webhooks/${id}/deliveries`));
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

  it('the check refuses an answer that breaks the document', () => {
    expect(problems('get', '/tickets/{id}', 404, { detail: 'Ticket not found' })).to.not.equal('');
    expect(problems('get', '/webhooks', 200, { items: [{ id: 'x' }] })).to.not.equal('');
    expect(problems('get', '/webhooks', 418, {})).to.equal(null);
  });
});
