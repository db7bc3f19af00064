// X-Request-ID (spec "Request id"): a valid client id is echoed, anything else is replaced by a
// generated one, and the business envelope's request_id equals the header.
import { expect } from 'chai';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const UNKNOWN_ARTICLE = `/api/v1/articles/${'0'.repeat(32)}`;

describe('X-Request-ID (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  const withId = (id: string) => ws.api('GET', UNKNOWN_ARTICLE, undefined, { 'x-request-id': id });

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace('team');
  });
  after(() => ts.close());

  it('echoes a valid client id, also in the business envelope', async () => {
    for (const id of ['abc-123', 'x'.repeat(200), '!~"#{}[]|\\^`']) {
      const reply = await withId(id);
      expect(reply.status).to.equal(404);
      expect(reply.headers.get('x-request-id')).to.equal(id);
      expect(reply.body.request_id).to.equal(id);
    }
  });

  it('replaces an id with spaces, too long or empty by a generated one, the same in the body', async () => {
    const seen = new Set<string>();
    for (const id of ['has space', 'x'.repeat(201), 'y'.repeat(300), 'tab\there']) {
      const reply = await withId(id);
      const header = reply.headers.get('x-request-id') ?? '';
      expect(header).to.not.equal(id);
      expect(header).to.match(/^[\x21-\x7e]{1,200}$/);
      expect(reply.body.request_id).to.equal(header);
      seen.add(header);
    }
    expect(seen.size, 'a new id per request').to.equal(4);
  });

  it('generates one when none is sent, on success and on every error format', async () => {
    for (const reply of [
      await ws.api('GET', '/api/v1/articles'),
      await ws.api('GET', '/api/v1/no-such-route'),
      await ws.api('POST', '/api/v1/articles', { title: 1 }),
      await ws.api('GET', UNKNOWN_ARTICLE),
    ]) {
      expect(reply.headers.get('x-request-id'), String(reply.status)).to.match(/^[\x21-\x7e]{1,200}$/);
    }
  });
});
