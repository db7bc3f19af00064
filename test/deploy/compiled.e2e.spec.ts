// The compiled build (`npm run build`, then `node dist/src/main.js`: what the Dockerfile runs) is the
// same service as `npm start` under tsx: its worker threads start from their .js entries without a
// loader (src/shared/worker.ts), the plain .mjs threads are in the build, and a webhook goes out
// signed after a write. Built here into a folder of its own under .cache/ (node_modules resolves
// from the repository above it).
import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { buildCompiled, createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { threadsOf } from '../support/threads.js';

const ADMIN = 'compiled-admin';

const json = async (url: string, method: string, token: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> => {
  const response = await fetch(url, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
};

describe('the compiled build (e2e, npm run build)', function () {
  this.timeout(120_000);
  let outDir: string;
  let compiled: string;
  let dataDir: string;
  let group: ProcessGroup;
  let receiver: Receiver;

  before(async () => {
    ({ dir: outDir, main: compiled } = await buildCompiled('compiled-'));
  });
  after(() => rmSync(outDir, { recursive: true, force: true }));
  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-compiled-'));
    group = createProcessGroup({ ROLE: 'all', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await group.stopAll();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('holds every module, the plain JavaScript threads included', () => {
    for (const file of ['src/main.js', 'src/webhooks/dispatch/thread-entry.js', 'src/webhooks/dispatch/index-thread-entry.js', 'src/shared/thread-launcher-thread.mjs', 'src/shared/wal-checkpointer-thread.mjs', 'projections/tickets-store-sqlite.js'])
      expect(existsSync(path.join(outDir, file)), file).to.equal(true);
  });

  it('starts without tsx, delivers a signed webhook from its own delivery thread, and starts again on its data', async () => {
    const service = await group.start('compiled', {}, { compiled });
    // No TypeScript loader anywhere: the threads run the build's JavaScript.
    expect(service.child.spawnargs.join(' ')).to.not.include('tsx');
    if (process.platform === 'linux') expect(threadsOf(service.child.pid!).map((t) => t.name)).to.include.members(['webhook-deliver', 'delivery-index']);
    const created = await json(`${service.url}/admin/v1/workspaces`, 'POST', ADMIN, { name: 'compiled', plan: 'business' });
    expect(created.status).to.equal(201);
    const apiKey = String(created.body['api_key']);
    expect((await json(`${service.url}/api/v1/webhooks`, 'POST', apiKey, { url: receiver.url })).status).to.equal(201);
    const ticket = await json(`${service.url}/api/v1/tickets`, 'POST', apiKey, { contact: { email: 'compiled@example.com' }, subject: 'Built', message: 'Hello' });
    expect(ticket.status).to.equal(201);
    const [delivery] = await receiver.waitForRequests(1);
    expect(delivery?.headers['webhook-signature']).to.match(/^v1,/);
    expect(JSON.parse(delivery!.body.toString('utf8'))).to.include({ type: 'ticket.created' });

    // The OpenAPI document, derived from the codecs at run time, is the same as under tsx.
    const openapi = await json(`${service.url}/api/v1/openapi.json`, 'GET', apiKey);
    expect(openapi.status).to.equal(200);
    expect(openapi.body['openapi']).to.match(/^3\.1/);
    service.kill('SIGTERM');
    await service.exited;
    const again = await group.start('compiled again', {}, { compiled });
    expect((await json(`${again.url}/api/v1/tickets/${String(ticket.body['id'])}`, 'GET', apiKey)).status).to.equal(200);
  });

  it('fails its start with the same message as under tsx when the configuration is wrong', async () => {
    const failing = group.start('compiled, bad config', { WEBHOOK_TIMEOUT_MS: 'soon' }, { compiled });
    const error = await failing.then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(error?.message).to.match(/WEBHOOK_TIMEOUT_MS/);
  });
});
