// Rotating WEBHOOK_SECRET_KEY over one data folder, with real servers and a real receiver: a key that
// cannot open the stored secrets stops start-up (a real `src/main.ts` process: exit 1, the variable
// named); the previous key in WEBHOOK_PREVIOUS_SECRET_KEYS opens them and they are sealed again with
// the new key, which then runs alone. Deliveries are signed with the secret shown at creation.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { SUBSCRIPTION_EVENTS } from '../../src/domain/subscription/subscription.js';
import { randomId } from '../../src/shared/ids.js';
import { KEY_FILE, createSecretBox, newWebhookSecret } from '../../src/webhooks/secrets.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { runSubscriptionCommand, secretContext } from '../../src/webhooks/subscriptions.js';
import { conformanceOf } from '../support/openapi-conformance.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { ADMIN_TOKEN, call, startTestService, type TestService } from '../support/server.js';
import { emit, eventIdOf, eventually, header, subscribe } from '../support/webhooks-dispatch.js';

const KEY_A = 'a1'.repeat(32);
const KEY_B = 'b2'.repeat(32);
const KEY_C = 'c3'.repeat(32);

interface Hook {
  readonly id: string;
  readonly secret: string;
}

describe('webhook secret key rotation (e2e)', function () {
  this.timeout(120_000);
  let receiver: Receiver;
  let dataDir: string;
  let ts: TestService | undefined;

  before(async () => {
    receiver = await startReceiver();
  });
  after(() => receiver.close());
  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-rotation-'));
  });
  afterEach(async () => {
    await ts?.close();
    ts = undefined;
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = async (env: Record<string, string>) => {
    await ts?.close();
    ts = await startTestService(env, { dataDir });
    return ts;
  };

  /** A workspace with two webhooks to the receiver; the server is closed after. */
  const twoHooks = async (env: Record<string, string>) => {
    const ws = await (await start(env)).createWorkspace();
    const hooks = [await subscribe(ws, receiver.url), await subscribe(ws, receiver.url)];
    await ts?.close();
    ts = undefined;
    return { apiKey: ws.apiKey, workspaceId: ws.workspaceId, hooks };
  };

  /** `src/main.ts` over the data folder must exit 1 without listening; resolves with what it printed. */
  const refusedStart = async (env: Record<string, string>): Promise<string> => {
    const { PATH, HOME } = process.env;
    const child = promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: { PATH: PATH ?? '', HOME: HOME ?? '', PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN, ...env },
      timeout: 30_000,
    });
    const failure = await child.then(
      () => expect.fail('the server started'),
      (error: { code: number | null; stdout: string; stderr: string }) => error,
    );
    expect(failure.code, failure.stdout + failure.stderr).to.equal(1);
    expect(failure.stdout).not.to.include('listening on');
    return failure.stderr;
  };

  /** The test endpoint delivers to the receiver, signed with the secret returned at creation. */
  const expectTestSigned = async (apiKey: string, hook: Hook) => {
    const sent = receiver.requests.length;
    const reply = await call(`${ts?.url}/api/v1/webhooks/${hook.id}/test`, 'POST', apiKey);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    expect(reply.body).to.include({ delivered: true, status_code: 200 });
    const request = (await receiver.waitForRequests(sent + 1))[sent] as ReceivedRequest;
    expect(verifySignature(hook.secret, request.body, header(request, 'X-Webhook-Signature'))).to.equal(true);
    expect(header(request, 'X-Webhook-Signature')).to.equal(reply.body.signature_header);
  };

  const resealEvents = async () => (await ts!.service.core.log.readAll({ after: 0 })).filter((e) => e.type === SUBSCRIPTION_EVENTS.secretResealed);

  it('refuses a changed key, opens the secrets with the previous key and reseals them, then runs on the new key alone', async () => {
    const { apiKey, workspaceId, hooks } = await twoHooks({ WEBHOOK_SECRET_KEY: KEY_A });

    const refusal = await refusedStart({ WEBHOOK_SECRET_KEY: KEY_B });
    expect(refusal).to.include('cannot start: WEBHOOK_SECRET_KEY: the secrets of 2 webhook subscriptions do not open');
    expect(refusal).to.include('WEBHOOK_PREVIOUS_SECRET_KEYS').and.not.include(KEY_FILE);
    for (const key of [KEY_A, KEY_B]) expect(refusal).not.to.include(key);

    await start({ WEBHOOK_SECRET_KEY: KEY_B, WEBHOOK_PREVIOUS_SECRET_KEYS: `${KEY_C},${KEY_A}` });
    for (const hook of hooks) await expectTestSigned(apiKey, hook);
    const resealed = await eventually('both secrets resealed', async () => ((await resealEvents()).length === 2 ? resealEvents() : false));
    expect(resealed.map((e) => e.stream).sort()).to.deep.equal(hooks.map((h) => `webhook-${h.id}`).sort());
    const withB = createSecretBox(Buffer.from(KEY_B, 'hex'));
    for (const event of resealed) expect(withB.needsResealing(String(event.data['secret_encrypted']))).to.equal(false);

    await start({ WEBHOOK_SECRET_KEY: KEY_B });
    for (const hook of hooks) await expectTestSigned(apiKey, hook);
    // The delivery engine signs with the secrets the read model opened with B alone.
    const event = await emit(ts!, workspaceId);
    const delivered = await eventually('the event delivered to both hooks', () => {
      const requests = receiver.requests.filter((r) => eventIdOf(r) === event.id);
      return requests.length >= 2 && requests;
    });
    for (const hook of hooks) {
      const signed = delivered.filter((r) => verifySignature(hook.secret, r.body, header(r, 'X-Webhook-Signature')));
      expect(signed, `a delivery signed for ${hook.id}`).to.have.length.greaterThan(0);
    }
    expect(await resealEvents()).to.have.length(2);
  });

  it('refuses when the generated key file was removed or replaced, naming the variable and the file', async () => {
    const { apiKey, hooks } = await twoHooks({});
    const file = path.join(dataDir, KEY_FILE);
    const original = readFileSync(file, 'utf8');

    rmSync(file);
    const removed = await refusedStart({});
    expect(removed).to.include('cannot start: WEBHOOK_SECRET_KEY: the secrets of 2 webhook subscriptions do not open').and.include(file);

    writeFileSync(file, `${KEY_C}\n`, { mode: 0o600 });
    const replaced = await refusedStart({});
    expect(replaced).to.include('cannot start: WEBHOOK_SECRET_KEY:').and.include(file);
    for (const key of [original.trim(), KEY_C]) expect(replaced).not.to.include(key);

    writeFileSync(file, original);
    await start({});
    for (const hook of hooks) await expectTestSigned(apiKey, hook);
  });

  it('answers the test endpoint with 503 while no key opens a secret that arrived live, and serves it once resealed', async () => {
    const server = await start({ WEBHOOK_SECRET_KEY: KEY_B });
    const ws = await server.createWorkspace();
    const id = randomId();
    const secret = newWebhookSecret();
    const context = secretContext(ws.workspaceId, id);
    // As a process misconfigured with key C would write it.
    const sealedByC = createSecretBox(Buffer.from(KEY_C, 'hex')).encrypt(secret, context);
    const create = { kind: 'create', url: receiver.url, events: [], description: '', secretEncrypted: sealedByC, at: '2026-01-01T00:00:00' } as const;
    expect((await runSubscriptionCommand(server.service.core, ws.workspaceId, id, create, undefined))._tag).to.equal('Right');

    const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(503);
    expect(reply.headers.get('retry-after')).to.match(/^\d+$/);
    // The API document describes this answer, its Retry-After required.
    const check = await conformanceOf(server.url);
    check.conforms('post', '/webhooks/{webhook_id}/test', reply);
    expect(check.doc.paths['/webhooks/{webhook_id}/test']?.['post']?.responses['503']?.headers?.['Retry-After']?.required).to.equal(true);
    expect(reply.body).to.include({ error_code: 'SERVICE_UNAVAILABLE', request_id: reply.headers.get('x-request-id') });
    expect(reply.body.error_message).to.include('WEBHOOK_SECRET_KEY');
    expect((await ws.api('GET', '/api/v1/webhooks')).body.items).to.deep.equal([]);

    // A process that holds C and has B as its current key seals it again: this server opens it now.
    const withB = createSecretBox(Buffer.from(KEY_B, 'hex'), [Buffer.from(KEY_C, 'hex')]);
    const reseal = { kind: 'reseal', from: sealedByC, to: withB.encrypt(secret, context) } as const;
    expect((await runSubscriptionCommand(server.service.core, ws.workspaceId, id, reseal, undefined))._tag).to.equal('Right');
    await eventually('the resealed subscription listed', async () => (await ws.api('GET', '/api/v1/webhooks')).body.items.length === 1);
    await expectTestSigned(ws.apiKey, { id, secret });
  });
});
