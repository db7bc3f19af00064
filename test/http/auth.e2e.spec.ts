// Authentication of /api/v1 (spec "Authentication"): every 401 case carries WWW-Authenticate: Bearer
// and the short form, and a key works again once re-enabled.
import { expect } from 'chai';
import type { KeyStatus } from '../../src/domain/workspace/workspace.js';
import { expectError } from '../support/http-formats.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';

const expect401 = (reply: Reply) => {
  expectError(reply, 401, 'short');
  expect(reply.headers.get('www-authenticate')).to.equal('Bearer');
  expect(reply.headers.get('x-request-id')).to.be.a('string');
};

describe('authentication (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  const get = (key: string | null, headers: Record<string, string> = {}) => call(`${ts.url}/api/v1/articles`, 'GET', key, undefined, headers);

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace('team');
  });
  after(() => ts.close());

  it('accepts a working key', async () => {
    expect((await get(ws.apiKey)).status).to.equal(200);
  });

  it('answers 401 without the header, with another scheme, or with a wrong key', async () => {
    expect401(await get(null));
    expect401(await get(null, { authorization: `Basic ${ws.apiKey}` }));
    expect401(await get(null, { authorization: 'Bearer' }));
    expect401(await get(`${ws.apiKey}x`));
    expect401(await get('sk_not-a-key'));
  });

  it('authenticates unknown paths under /api/v1 before answering 404', async () => {
    expect401(await call(`${ts.url}/api/v1/no-such-thing`, 'GET', null));
    expectError(await call(`${ts.url}/api/v1/no-such-thing`, 'GET', ws.apiKey), 404, 'short');
  });

  it('answers 401 for a disabled key, 200 again once enabled, and 401 for a deleted key', async () => {
    const issued = await ts.admin('POST', `/admin/v1/workspaces/${ws.workspaceId}/keys`);
    expect(issued.status).to.equal(201);
    const { key_id: keyId, api_key: apiKey } = issued.body as { key_id: string; api_key: string };
    const setStatus = async (status: KeyStatus) => {
      const patched = await ts.admin('PATCH', `/admin/v1/workspaces/${ws.workspaceId}/keys/${keyId}`, { status });
      expect(patched.status).to.equal(200);
    };
    expect((await get(apiKey)).status).to.equal(200);
    await setStatus('disabled');
    expect401(await get(apiKey));
    await setStatus('active');
    expect((await get(apiKey)).status).to.equal(200);
    await setStatus('deleted');
    expect401(await get(apiKey));
    expect((await get(ws.apiKey)).status, 'the other key is unaffected').to.equal(200);
  });

  it('answers 401 for every key of a blocked workspace until it is unblocked', async () => {
    const blocked = await ts.createWorkspace('team');
    const block = (flag: boolean) => ts.admin('PATCH', `/admin/v1/workspaces/${blocked.workspaceId}`, { blocked: flag });
    expect((await block(true)).status).to.equal(200);
    expect401(await blocked.api('GET', '/api/v1/articles'));
    await block(false);
    expect((await blocked.api('GET', '/api/v1/articles')).status).to.equal(200);
  });

  it('keeps the admin and internal surfaces closed to API keys', async () => {
    const reply = await ws.api('POST', '/admin/v1/workspaces', { name: 'x' });
    expect401(reply);
  });
});
