// Secrets stay secret: a webhook secret appears only in its creation answer (or the rotation answer
// that made it) and an API key only in its issuing answer, and in those answers' Idempotency-Key
// retries, which the log keeps sealed. Neither is in the log file, the server's output, /updates, an
// export, any other answer or any error body, across a real server process that also delivers,
// fails and restarts.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { filesUnder } from '../support/files.js';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN_TOKEN, call } from '../support/server.js';

const run = promisify(execFile);

describe('secrets and keys at rest and in output (e2e, server process)', function () {
  this.timeout(90_000);
  let group: ProcessGroup;
  let receiver: Receiver;
  let dataDir: string;

  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-secrets-'));
    group = createProcessGroup({ DATA_DIR: dataDir, ADMIN_TOKEN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8', WEBHOOK_RETRY_DELAYS: '50ms,50ms,50ms,50ms,50ms', WEBHOOK_TIMEOUT_MS: '500' });
    receiver = await startReceiver();
  });
  after(async function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs(200));
    await group.stopAll();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('never shows a secret or key again after the answer that issued it', async () => {
    let server = await group.start('first', {});
    const seen: string[] = [];
    const api = async (method: string, p: string, token: string | null, body?: unknown, headers?: Record<string, string>) => {
      const reply = await call(`${server.url}${p}`, method, token, body, headers);
      seen.push(JSON.stringify(reply.body), JSON.stringify([...reply.headers]));
      return reply;
    };
    // Each issuing request under an Idempotency-Key, and retried: the same answer, replayed from its sealed record.
    const issue = async (p: string, token: string, idempotencyKey: string, body?: unknown) => {
      const first = await call(`${server.url}${p}`, 'POST', token, body, { 'Idempotency-Key': idempotencyKey });
      const again = await call(`${server.url}${p}`, 'POST', token, body, { 'Idempotency-Key': idempotencyKey });
      expect(again.headers.get('idempotent-replayed'), p).to.equal('true');
      expect(again.body, p).to.deep.equal(first.body);
      return first;
    };
    const created = await issue('/admin/v1/workspaces', ADMIN_TOKEN, 'workspace-1', { name: 'secrets' });
    const key = String(created.body.api_key);
    const extra = await issue(`/admin/v1/workspaces/${created.body.workspace_id}/keys`, ADMIN_TOKEN, 'key-1');
    const secondKey = String(extra.body.api_key);
    const hook = await issue('/api/v1/webhooks', key, 'hook-1', { url: receiver.url });
    const secret = String(hook.body.secret);
    expect(secret).to.match(/^whsec_/);

    // Traffic that writes, delivers, fails and errs.
    await api('POST', '/api/v1/tickets', key, { contact: { email: 'a@example.com' }, message: 'hello' });
    await api('POST', `/api/v1/webhooks/${hook.body.id}/test`, key);
    const rotate = () => call(`${server.url}/api/v1/webhooks/${hook.body.id}/secret/rotate`, 'POST', key, { grace_period_seconds: 3600 }, { 'Idempotency-Key': 'rotate-1' });
    const rotated = String((await rotate()).body.secret);
    expect(rotated).to.match(/^whsec_/).and.not.equal(secret);
    expect((await rotate()).body.secret).to.equal(rotated);
    await api('POST', `/api/v1/webhooks/${hook.body.id}/test`, key);
    receiver.respond({ kind: 'status', status: 500 });
    await api('POST', '/api/v1/tickets', key, { contact: { email: 'b@example.com' }, message: 'fail me' });
    await api('GET', '/api/v1/webhooks', key);
    await api('PATCH', `/api/v1/webhooks/${hook.body.id}`, key, { description: 'x' });
    await api('GET', `/api/v1/webhooks/${hook.body.id}/deliveries`, key);
    await api('GET', '/api/v1/tickets', `${key}x`);
    await api('POST', '/api/v1/tickets', key, '{broken', { 'content-type': 'application/json' });
    await api('GET', '/api/v1/updates?offset=0&limit=1000&timeout=0', key);
    await api('GET', '/api/v1/updates?offset=0&limit=1000&timeout=0', secondKey);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const exported = await run(process.execPath, ['--import', 'tsx', 'scripts/export.ts', '--url', server.url, '--key', key]);
    seen.push(exported.stdout, exported.stderr);

    // A restart reads every secret back from the log; it must not print them either.
    server.kill('SIGTERM');
    await server.exited;
    server = await group.start('second', {});
    await api('POST', `/api/v1/webhooks/${hook.body.id}/test`, key);
    server.kill('SIGTERM');
    await server.exited;

    const deliveries = receiver.requests.map((r) => `${JSON.stringify(r.headers)}${r.body.toString('utf8')}`);
    const files = filesUnder(dataDir)
      .filter((file) => !file.endsWith('.key'))
      .map((file) => readFileSync(file).toString('latin1'));
    const places: [string, string[]][] = [
      ['answers after the issuing ones', seen],
      ['server output', [group.outputs(10_000)]],
      ['deliveries', deliveries],
      ['data folder', files],
    ];
    for (const [where, texts] of places) {
      for (const [name, value] of [
        ['webhook secret', secret],
        ['rotated webhook secret', rotated],
        ['rotated webhook secret key bytes', rotated.slice('whsec_'.length)],
        ['API key', key],
        ['second API key', secondKey],
      ]) {
        expect(texts.some((t) => t.includes(value as string)), `${name} found in ${where}`).to.equal(false);
      }
    }
    expect(deliveries.length).to.be.greaterThan(1);
  });
});
