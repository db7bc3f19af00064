// Rate limits (spec "Limits") with small limits: per key after the key's first request, per client
// IP for everything else (no key, wrong key, and a new key's first request); 429 in the business
// envelope with a whole-seconds Retry-After; no X-RateLimit-* headers; fixed windows that reset.
import { expect } from 'chai';
import { expectError } from '../support/http-formats.js';
import { call, startTestService, type Reply, type TestService } from '../support/server.js';

const PER_KEY = 5;
const PER_IP = 3;

const expect429 = (reply: Reply, windowSeconds: number) => {
  expectError(reply, 429, 'business', 'RATE_LIMIT_EXCEEDED');
  const retryAfter = reply.headers.get('retry-after') ?? '';
  expect(retryAfter).to.match(/^\d+$/);
  expect(Number(retryAfter)).to.be.within(1, windowSeconds);
};

const rateHeaders = (reply: Reply) => [...reply.headers.keys()].filter((name) => name.toLowerCase().startsWith('x-ratelimit'));

describe('rate limits (e2e)', () => {
  let ts: TestService;
  const start = (windowMs: number) => startTestService({ RATE_LIMIT_PER_KEY: String(PER_KEY), RATE_LIMIT_PER_IP: String(PER_IP), RATE_LIMIT_WINDOW_MS: String(windowMs) });
  const anonymous = (key: string | null) => call(`${ts.url}/api/v1/articles`, 'GET', key);

  afterEach(() => ts.close());

  it('gives a key PER_KEY requests after its first one, which counts against the IP', async () => {
    ts = await start(60_000);
    const ws = await ts.createWorkspace('team');
    const replies: Reply[] = [];
    // One bucket for all paths of the key.
    for (let i = 0; i < PER_KEY + 1; i++) replies.push(await ws.api('GET', i % 2 === 0 ? '/api/v1/articles' : `/api/v1/articles/${'0'.repeat(32)}`));
    expect(replies.map((r) => r.status)).to.deep.equal([200, 404, 200, 404, 200, 404]);
    const refused = await ws.api('GET', '/api/v1/articles');
    expect429(refused, 60);
    for (const reply of [...replies, refused]) expect(rateHeaders(reply)).to.deep.equal([]);

    // The IP bucket already holds that first request: PER_IP - 1 wrong-key requests remain.
    const statuses = [];
    for (let i = 0; i < PER_IP; i++) statuses.push((await anonymous('sk_wrong')).status);
    expect(statuses).to.deep.equal([401, 401, 429]);
  });

  it('counts requests without a working key against the IP, and only those', async () => {
    ts = await start(60_000);
    const verified = await ts.createWorkspace('team');
    const fresh = await ts.createWorkspace('team');
    expect((await verified.api('GET', '/api/v1/articles')).status).to.equal(200); // IP 1
    expect((await anonymous(null)).status).to.equal(401); // IP 2
    expect((await anonymous('sk_wrong')).status).to.equal(401); // IP 3
    expect429(await anonymous(null), 60);
    expect429(await anonymous('sk_wrong'), 60);
    // A key already verified in this process has its own bucket; a new key's first request does not.
    expect((await verified.api('GET', '/api/v1/articles')).status).to.equal(200);
    expect429(await fresh.api('GET', '/api/v1/articles'), 60);
  });

  it('opens a new window once Retry-After has passed', async () => {
    ts = await start(2_000);
    let reply: Reply | undefined;
    for (let i = 0; i <= PER_IP; i++) reply = await anonymous(null);
    if (reply === undefined) throw new Error('no request made');
    expect429(reply, 2);
    await new Promise((resolve) => setTimeout(resolve, Number(reply?.headers.get('retry-after')) * 1000));
    expect((await anonymous(null)).status).to.equal(401);
  });
});
