// Webhook URLs (spec rule 3: not checked at registration): any string up to 8192 characters is
// accepted at create and PATCH; one that is not an absolute http(s) URL fails at the test endpoint and
// at delivery without a network attempt, recorded like any failed attempt.
import { expect } from 'chai';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { FAST_RETRIES, emit, eventually } from '../support/webhooks-dispatch.js';

const INVALID_URL = 'invalid url: must be an absolute http or https URL';
const NOT_URLS = ['', '   ', 'not a url', 'ftp://x', '/hook', 'javascript:alert(1)'];

describe('webhook URLs (e2e)', () => {
  let ts: TestService;
  let receiver: Receiver;
  let ws: TestWorkspace;

  before(async () => {
    ts = await startTestService({ ...FAST_RETRIES, WEBHOOK_MAX_SUBSCRIPTIONS: '100' });
    receiver = await startReceiver();
  });
  after(async () => {
    await receiver.close();
    await ts.close();
  });
  beforeEach(async () => {
    ws = await ts.createWorkspace();
  });

  const create = async (url: unknown) => ws.api('POST', '/api/v1/webhooks', { url });

  it('accepts any string up to 8192 characters at create and PATCH, as given', async () => {
    const long = `${receiver.url}?q=${'a'.repeat(5000 - receiver.url.length - 3)}`;
    expect(long).to.have.length(5000);
    const urls = [...NOT_URLS, long, 'x'.repeat(8192)];
    for (const [i, url] of urls.entries()) {
      const created = await create(url);
      expect(created.status, JSON.stringify(url.slice(0, 20))).to.equal(201);
      expect(created.body.url).to.equal(url);
      const next = urls[(i + 1) % urls.length];
      const patched = await ws.api('PATCH', `/api/v1/webhooks/${created.body.id}`, { url: next });
      expect(patched.status).to.equal(200);
      expect(patched.body.url).to.equal(next);
    }
  });

  it('refuses a longer string or a non-string as a schema 422', async () => {
    const tooLong = await create('x'.repeat(8193));
    expect(tooLong.status).to.equal(422);
    expect(tooLong.body).to.deep.equal({ detail: [{ type: 'type_error', loc: ['body', 'url'], msg: 'String should have at most 8192 characters' }] });
    for (const url of [42, null, ['http://x.test/'], { href: 'http://x.test/' }]) {
      const reply = await create(url);
      expect(reply.status, JSON.stringify(url)).to.equal(422);
      expect(reply.body.detail[0]).to.include({ type: 'type_error', msg: 'Input should be a valid string' }).and.to.have.deep.property('loc', ['body', 'url']);
    }
    const { id } = (await create(receiver.url)).body as { id: string };
    const patch = await ws.api('PATCH', `/api/v1/webhooks/${id}`, { url: 'x'.repeat(8193) });
    expect(patch.status).to.equal(422);
    expect(patch.body.detail[0]).to.deep.include({ loc: ['body', 'url'], msg: 'String should have at most 8192 characters' });
  });

  it('test endpoint: 200 with delivered false and the error for what is not an absolute http(s) URL, without sending', async () => {
    const before = receiver.requests.length;
    for (const url of NOT_URLS) {
      const { id } = (await create(url)).body as { id: string };
      const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
      expect(reply.status, url).to.equal(200);
      expect(reply.body).to.include({ delivered: false, status_code: null, error: INVALID_URL, latency_ms: 0 });
      expect(reply.body.delivery_id).to.match(/^[0-9a-f]{32}$/);
      expect(reply.body.signature_header).to.match(/^sha256=[0-9a-f]{64}$/);
    }
    // A long URL that is one reaches its receiver.
    const long = `${receiver.url}?q=${'b'.repeat(5000)}`;
    const { id } = (await create(long)).body as { id: string };
    expect((await ws.api('POST', `/api/v1/webhooks/${id}/test`)).body).to.include({ delivered: true, status_code: 200, error: null });
    expect(receiver.requests.slice(before).map((r) => r.path)).to.deep.equal([`/hook?q=${'b'.repeat(5000)}`]);
  });

  it('delivery: each attempt fails with the error, the delivery ends failed and counts a consecutive failure', async () => {
    const { id } = (await create('not a url')).body as { id: string };
    await emit(ts, ws.workspaceId);
    const [delivery] = await eventually('the delivery failed', async () => {
      const items = (await ws.api('GET', `/api/v1/webhooks/${id}/deliveries`)).body.items as { status: string; attempts: { status_code: number | null; error: string; delivered: boolean }[] }[];
      return items[0]?.status === 'failed' && items;
    });
    expect(delivery?.attempts).to.have.length(6);
    for (const attempt of delivery?.attempts ?? []) expect(attempt).to.include({ delivered: false, status_code: null, error: INVALID_URL });
    const patched = await ws.api('PATCH', `/api/v1/webhooks/${id}`, {});
    expect(patched.body).to.include({ consecutive_failures: 1, is_active: true });
  });
});
