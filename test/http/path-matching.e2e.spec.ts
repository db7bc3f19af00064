// Paths match exactly and case-sensitively on the whole server, and no spelling of a path reaches a
// handler around its guard. Every registered route is tried as written and in other spellings
// (letter case, percent-encoded letters, doubled and trailing slashes, `;` parameters, dot segments,
// an encoded slash), sent byte for byte with node:http so no client normalises them. Without
// credentials nothing answers but 401 or 404; with credentials every other spelling is an unknown
// route (404, or 405 where it fits another route's parameter); and the log shows that no handler wrote anything.
import { request } from 'node:http';
import { expect } from 'chai';
import fc from 'fast-check';
import type { RegisteredRoute } from '../../src/http/app.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/server.js';
import { surfaceOf } from '../support/surfaces.js';

const ID = 'f'.repeat(32);

interface RawReply {
  readonly status: number;
  readonly body: string;
}

/** Sends `target` as the request line's path exactly as given. */
const raw = (base: string, method: string, target: string, token: string | null): Promise<RawReply> =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(base);
    const headers: Record<string, string> = { 'content-type': 'application/json', ...(token === null ? {} : { authorization: `Bearer ${token}` }) };
    const body = ['POST', 'PUT', 'PATCH'].includes(method) ? '{"name":"x","base_url":"https://elsewhere.example","blocked":true}' : undefined;
    const req = request({ hostname, port, method, path: target, headers: body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });

const isParam = (segment: string) => segment.startsWith(':');
const hasLetter = (segment: string) => /[a-z]/i.test(segment);
const flip = (c: string) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase());
const hex = (c: string) => `%${c.charCodeAt(0).toString(16)}`;

/** The route's path with every parameter filled in. */
const concrete = (segments: readonly string[]) => `/${segments.map((s) => (isParam(s) ? ID : s)).join('/')}`;

/** Other spellings of a route's path that must not reach it; only literal segments are changed, never a parameter's value. */
const spellings = (pattern: string): string[] => {
  const segments = pattern.split('/').slice(1);
  const literal = segments.map((s, i) => (isParam(s) ? -1 : i)).filter((i) => i >= 0);
  const changed = (i: number, change: (s: string) => string) => concrete(segments.map((s, j) => (j === i ? change(s) : s)));
  const out = new Set<string>([
    concrete(segments.map((s) => (isParam(s) ? s : s.toUpperCase()))),
    concrete(segments.map((s) => (isParam(s) ? s : [...s].map((c, k) => (k % 2 === 0 ? flip(c) : c)).join('')))),
    `${concrete(segments)}/`,
    `/${concrete(segments)}`,
    concrete(segments).replace(/^\/([^/]+)\//, '/$1%2F'),
    concrete(segments).replace(/^\/([^/]+)\//, '/$1/./'),
    concrete(segments).replace(/^\/([^/]+)\//, '/$1/x/../'),
  ]);
  for (const i of literal) {
    const segment = segments[i] as string;
    if (hasLetter(segment)) {
      out.add(changed(i, (s) => s[0]?.toUpperCase() + s.slice(1)));
      out.add(changed(i, (s) => s.toUpperCase()));
      const at = [...segment].findIndex((c) => /[a-z]/i.test(c));
      out.add(changed(i, (s) => s.slice(0, at) + hex(s[at] as string) + s.slice(at + 1)));
      out.add(changed(i, (s) => s.slice(0, at) + hex(s[at] as string).toUpperCase() + s.slice(at + 1)));
    }
    out.add(changed(i, (s) => `${s};x=1`));
    out.add(changed(i, (s) => `${s}/`));
  }
  out.delete(concrete(segments));
  return [...out];
};

const methodsOf = (route: RegisteredRoute) => route.methods.filter((m) => m !== 'HEAD');

describe('path matching on the whole server (e2e)', function () {
  this.timeout(120_000);

  describe('with ADMIN_TOKEN set', () => {
    let ts: TestService;
    let apiKey: string;
    let routes: readonly RegisteredRoute[];

    before(async () => {
      ts = await startTestService({ RATE_LIMIT_PER_IP: '1000000' });
      apiKey = (await ts.createWorkspace('team')).apiKey;
      routes = ts.service.routes;
    });
    after(() => ts.close());

    // By prefix: another spelling of a keyless route under /api/v1 is an unknown /api/v1 path, which a key opens.
    const credentialFor = (path: string) => (path.startsWith('/api/v1/') ? apiKey : ADMIN_TOKEN);

    it('registers routes on every surface, each under its prefix', () => {
      const surfaces = new Set(routes.map((r) => surfaceOf(r.path)));
      expect([...surfaces].sort()).to.deep.equal(['admin', 'api', 'open']);
      expect(routes.map((r) => r.path)).to.include.members(['/api/v1/tickets', '/admin/v1/workspaces', '/healthz']);
      expect(routes.some((r) => r.path.startsWith('/internal/v1/'))).to.equal(true);
    });

    it('answers every route as written without credentials with 401, never reaching its handler', async () => {
      const head = await ts.service.core.log.headPosition();
      for (const route of routes.filter((r) => surfaceOf(r.path) !== 'open')) {
        for (const method of methodsOf(route)) {
          const reply = await raw(ts.url, method, concrete(route.path.split('/').slice(1)), null);
          expect(reply.status, `${method} ${route.path}`).to.equal(401);
        }
      }
      expect(await ts.service.core.log.headPosition()).to.equal(head);
    });

    it('answers every other spelling of every route with 401 or 404 without credentials, and 404 or 405 with them', async () => {
      const head = await ts.service.core.log.headPosition();
      let tried = 0;
      for (const route of routes) {
        for (const method of methodsOf(route)) {
          for (const target of spellings(route.path)) {
            const anonymous = await raw(ts.url, method, target, null);
            expect([401, 404], `${method} ${target} without credentials: ${anonymous.status} ${anonymous.body}`).to.include(anonymous.status);
            const authorised = await raw(ts.url, method, target, credentialFor(route.path));
            // 405 where another route's parameter takes the changed segment (POST /media/Upload meets GET /media/:id).
            expect([404, 405], `${method} ${target} with credentials: ${authorised.status} ${authorised.body}`).to.include(authorised.status);
            tried += 1;
          }
        }
      }
      expect(tried).to.be.greaterThan(routes.length * 10);
      expect(await ts.service.core.log.headPosition(), 'no handler wrote to the log').to.equal(head);
    });

    it('treats any change of letter case in a route as an unknown route (property)', async () => {
      const literalLetters = (path: string) => [...path].filter((c, i) => /[a-z]/i.test(c) && !path.slice(0, i).split('/').at(-1)?.startsWith(':'));
      const candidates = routes.filter((r) => surfaceOf(r.path) !== 'open' && literalLetters(r.path).length > 0);
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...candidates), fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), async (route, mask) => {
          let k = 0;
          const segments = route.path.split('/').slice(1).map((s) => (isParam(s) ? s : [...s].map((c) => (/[a-z]/i.test(c) && mask[k++ % mask.length] ? flip(c) : c)).join('')));
          const target = concrete(segments);
          fc.pre(target !== concrete(route.path.split('/').slice(1)));
          for (const method of methodsOf(route)) {
            expect([404, 405], `${method} ${target}`).to.include((await raw(ts.url, method, target, credentialFor(route.path))).status);
          }
        }),
        { numRuns: 150 },
      );
    });
  });

  describe('with ADMIN_TOKEN unset', () => {
    let ts: TestService;

    before(async () => {
      ts = await startTestService({ ADMIN_TOKEN: '', RATE_LIMIT_PER_IP: '1000000' });
    });
    after(() => ts.close());

    it('answers 404 for every admin and internal route in every spelling, with or without a token', async () => {
      const head = await ts.service.core.log.headPosition();
      for (const route of ts.service.routes.filter((r) => surfaceOf(r.path) === 'admin')) {
        for (const method of methodsOf(route)) {
          for (const target of [concrete(route.path.split('/').slice(1)), ...spellings(route.path)]) {
            for (const token of [null, ADMIN_TOKEN, '']) {
              const reply = await raw(ts.url, method, target, token);
              expect(reply.status, `${method} ${target}: ${reply.body}`).to.equal(404);
            }
          }
        }
      }
      expect(await ts.service.core.log.headPosition()).to.equal(head);
    });
  });
});
