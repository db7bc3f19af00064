// Property tests over every /api/v1 route the service registers (as the service lists them, so new
// routes join automatically): random path parameters, query strings, headers and bodies never give
// a 5xx, and every error body is one of the contract's three formats.
import { expect } from 'chai';
import fc from 'fast-check';
import { errorFormatOf } from '../support/http-formats.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const RUNS = 100;

interface Route {
  readonly method: string;
  readonly path: string;
}

/** The /api/v1 routes as the service registered them. */
const apiRoutes = (ts: TestService): Route[] =>
  ts.service.routes.filter((route) => route.path.startsWith('/api/v1/')).flatMap((route) => route.methods.filter((m) => m !== 'HEAD').map((method) => ({ method, path: route.path })));

const printable = (maxLength: number) => fc.array(fc.integer({ min: 0x20, max: 0x7e }), { maxLength }).map((codes) => String.fromCharCode(...codes));

const FIELD_NAMES = ['title', 'body', 'subject', 'priority', 'status', 'contact', 'message', 'content', 'media_ids', 'url', 'events', 'description', 'is_active', 'email', 'telegram_id', 'full_name', 'phone', 'rating', 'comment', 'ticket_id', 'file'];
const QUERY_NAMES = ['page', 'page_size', 'status', 'offset', 'types', 'limit', 'timeout', 'contact_id', 'priority', 'q'];

/** Ids of resources that exist, filled in before the run, so that routes get past their 404s. */
const knownIds: string[] = [];

const pathValue = fc.oneof(
  fc.constant(null).map(() => knownIds[0] ?? 'x'),
  fc.integer({ min: 0, max: 10 }).map((i) => knownIds[i % Math.max(1, knownIds.length)] ?? 'x'),fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 32, maxLength: 32 }), fc.constant('0'.repeat(32)), printable(40).filter((s) => s.trim() !== ''));
const queryValue = fc.oneof(printable(20), fc.integer({ min: -5, max: 2_000_000 }).map(String), fc.constantFrom('0', '1', '100', '1e3', 'ticket.created', 'open,closed', ''));
const query = fc.oneof(
  fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), queryValue), { maxLength: 4 }).map((pairs) => new URLSearchParams(pairs).toString()),
  printable(40).map((raw) => raw.replace(/[#\s]/g, '')),
);
// Bodies near what the routes accept, so that commands run, not only the validation.
const plausible = fc
  .record(
    {
      title: fc.string({ maxLength: 30 }),
      body: fc.string({ maxLength: 30 }),
      subject: fc.option(fc.string({ maxLength: 30 }), { nil: null }),
      priority: fc.constantFrom('normal', 'high', 'urgent'),
      status: fc.constantFrom('new', 'open', 'in_progress', 'pending', 'resolved', 'closed', 'gone'),
      contact: fc.oneof(fc.constant({ email: 'a@example.com' }), fc.constant({ telegram_id: '42' }), fc.constant({})),
      message: fc.oneof(fc.string({ maxLength: 20 }), fc.record({ content: fc.string({ maxLength: 20 }) })),
      content: fc.string({ maxLength: 30 }),
      url: fc.constantFrom('http://127.0.0.1:9/hook', 'not a url'),
      events: fc.subarray(['ticket.created', 'message.created', 'nope.event']),
      description: fc.string({ maxLength: 20 }),
      is_active: fc.boolean(),
      rating: fc.integer({ min: 0, max: 6 }),
      comment: fc.string({ maxLength: 20 }),
      trigger: fc.constantFrom('auto', 'manual'),
    },
  )
  .chain((all) => fc.subarray(Object.keys(all), { maxLength: 3 }).map((keys) => JSON.stringify(Object.fromEntries(keys.map((k) => [k, all[k as keyof typeof all]])))));
const body = fc.oneof(
  plausible,
  plausible,
  fc.dictionary(fc.constantFrom(...FIELD_NAMES), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 5 }).map((o) => JSON.stringify(o)),
  fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v) ?? 'null'),
  printable(60),
  fc.uint8Array({ maxLength: 200 }),
);
const contentType = fc.constantFrom('application/json', 'application/json', 'application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=xyz', 'application/merge-patch+json', null);

const request = (route: Route) =>
  fc.record({
    params: fc.array(pathValue, { minLength: 3, maxLength: 3 }),
    query,
    requestId: fc.option(printable(220), { nil: null }),
    contentType,
    body: fc.option(body, { nil: null }),
  });

const concretePath = (route: Route, params: readonly string[]) => {
  let i = 0;
  return route.path.replace(/:[A-Za-z_]+/g, () => encodeURIComponent(params[i++ % params.length] ?? 'x'));
};

describe('every /api/v1 route under random input (property, e2e)', function () {
  this.timeout(120_000);
  let ts: TestService;
  let ws: TestWorkspace;
  let routes: Route[] = [];

  before(async () => {
    ts = await startTestService({ RATE_LIMIT_PER_KEY: '1000000', RATE_LIMIT_PER_IP: '1000000' });
    ws = await ts.createWorkspace('business');
    routes = apiRoutes(ts);
    const ticket = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'p@example.com' }, subject: 'seed', message: 'hello' });
    const article = await ws.api('POST', '/api/v1/articles', { title: 'seed', body: 'seed' });
    const webhook = await ws.api('POST', '/api/v1/webhooks', { url: 'http://127.0.0.1:9/hook', description: 'seed' });
    for (const reply of [ticket, article, webhook]) if (typeof reply.body?.id === 'string') knownIds.push(reply.body.id);
    if (typeof ticket.body?.contact_id === 'string') knownIds.push(ticket.body.contact_id);
  });
  after(() => ts.close());

  it('finds the routes to test', () => {
    expect(routes.map((r) => `${r.method} ${r.path}`)).to.include.members(['POST /api/v1/media/upload', 'GET /api/v1/articles']);
  });

  it('never answers 5xx, and errors always come in a contract format', async () => {
    for (const route of routes) {
      await fc.assert(
        fc.asyncProperty(request(route), async (input) => {
          const search = new URLSearchParams(input.query);
          // A long poll would wait for events: ask it not to.
          if (route.path.endsWith('/updates')) search.set('timeout', '0');
          const url = `${ts.url}${concretePath(route, input.params)}?${search.toString()}`;
          const headers: Record<string, string> = { authorization: `Bearer ${ws.apiKey}` };
          if (input.requestId !== null) headers['x-request-id'] = input.requestId;
          if (input.contentType !== null) headers['content-type'] = input.contentType;
          const hasBody = input.body !== null && route.method !== 'GET';
          const response = await fetch(url, { method: route.method, headers, redirect: 'manual', ...(hasBody ? { body: input.body } : {}) });
          const text = await response.text();
          const label = `${route.method} ${url} → ${response.status} ${text.slice(0, 300)}`;
          expect(response.status, label).to.be.within(200, 499);
          expect(response.headers.get('x-request-id'), label).to.match(/^[\x21-\x7e]{1,200}$/);
          if (response.status >= 400) expect(errorFormatOf(JSON.parse(text)), label).to.not.equal(null);
        }),
        { numRuns: RUNS },
      );
    }
  });
});
