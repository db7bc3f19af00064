// The README's examples are the files in examples/, quoted verbatim (this spec fails when the two
// drift apart), and each one is run here as a reader would run it: the shell scripts with curl
// against a live service, the TypeScript programs from a folder outside the repository, after
// `tsc --strict`, with the five-minute guide's listen → receiver path end to end.
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createHmac } from 'node:crypto';
import { runProcess } from '../support/run-process.js';
import { startListen } from '../support/listen-process.js';
import { startReceiver } from '../support/receiver.js';
import { ADMIN_TOKEN, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { emit, eventually, subscribe } from '../support/webhooks-dispatch.js';

const REPO = process.cwd();
const EXAMPLES = path.join(REPO, 'examples');
const BIN = path.join(REPO, 'node_modules', '.bin');
const examples = readdirSync(EXAMPLES).sort();

describe('README examples (e2e)', function () {
  this.timeout(60_000);
  let svc: TestService;
  let ws: TestWorkspace;
  let outside: string;
  const children: ChildProcess[] = [];

  before(async () => {
    svc = await startTestService();
    // The entry plan, as the first workspace of `npm start` is.
    ws = await svc.createWorkspace();
    outside = mkdtempSync(path.join(tmpdir(), 'sp-readme-'));
    for (const file of examples) copyFileSync(path.join(EXAMPLES, file), path.join(outside, file));
    // What `npm i standardwebhooks` gives a reader's folder.
    symlinkSync(path.join(REPO, 'node_modules'), path.join(outside, 'node_modules'));
  });
  after(async () => {
    // The whole group: the tsx command runs the example in a child process of its own, which killing
    // the command alone would leave running.
    for (const child of children) {
      try {
        process.kill(-(child.pid as number), 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await svc.close();
    rmSync(outside, { recursive: true, force: true });
  });

  const env = (extra: Record<string, string> = {}) => ({ PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', URL: svc.url, ...extra });
  /** Runs an example from the folder outside the repository. */
  const run = (command: string, args: readonly string[], extra: Record<string, string>) => runProcess(command, args, { cwd: outside, env: env(extra) });
  const script = (name: string, extra: Record<string, string>) => run('bash', [name], extra);
  /** A long-running example program, its output lines collected. */
  const program = (name: string, extra: Record<string, string>) => {
    const child = spawn(path.join(BIN, 'tsx'), [name], { cwd: outside, env: env(extra), detached: true });
    children.push(child);
    const lines: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== '')));
    return { child, lines };
  };
  const freePort = async (): Promise<number> => {
    const probe = await startReceiver();
    await probe.close();
    return probe.port;
  };
  const lastJson = (stdout: string) => JSON.parse(stdout.trim().split('\n').at(-1) ?? 'null');

  it('README quotes every file of examples/ verbatim', () => {
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    expect(examples).to.include.members(['first-ticket.sh', 'receive-webhook.ts', 'receive-standard-webhook.ts', 'poll-updates.ts', 'upload.sh', 'knowledge-base.sh', 'new-api-key.sh', 'export-history.sh', 'export-log.sh', 'rotate-webhook-secret.sh', 'replay-webhook-history.sh']);
    for (const file of examples) {
      const fence = file.endsWith('.ts') ? 'ts' : 'sh';
      expect(readme, `README.md must quote examples/${file} in a \`\`\`${fence} block`).to.include(`\`\`\`${fence}\n${readFileSync(path.join(EXAMPLES, file), 'utf8')}\`\`\``);
    }
  });

  it('the TypeScript examples pass tsc --strict outside the repository, importing nothing from it', () => {
    const programs = examples.filter((f) => f.endsWith('.ts'));
    for (const file of programs) expect(readFileSync(path.join(outside, file), 'utf8')).not.to.match(/from '\.\.?\//);
    const tsc = spawnSync(path.join(BIN, 'tsc'), ['--strict', '--noEmit', '--skipLibCheck', '--target', 'es2022', '--module', 'nodenext', '--types', 'node', '--typeRoots', path.join(REPO, 'node_modules', '@types'), ...programs], { cwd: outside, encoding: 'utf8' });
    expect(tsc.status, tsc.stdout).to.equal(0);
  });

  it('a first start prints what the README shows, and its hint for a lost key issues one that works', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-first-start-'));
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], { env: { ...env(), PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN } });
    children.push(child);
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
    await eventually('the service to listen', () => out.includes('listening on'), 30_000);
    const readme = readFileSync(path.join(REPO, 'README.md'), 'utf8');
    const shown = /\$ ADMIN_TOKEN=change-me npm start\n([\s\S]*?)\n```/.exec(readme)?.[1] ?? '';
    // The same lines, ids, keys and paths aside.
    const shape = (text: string) => text.trim().replace(/[0-9a-f]{32}/g, 'ID').replace(/sk_\S+/g, 'KEY').replace(/(on http:\/\/[\d.]+:)\d+ with data in \S+/, '$1PORT with data in DIR');
    expect(shape(out)).to.equal(shape(shown));
    const [, method, hinted] = /(POST) (\/admin\/v1\/workspaces\/\w+\/keys)/.exec(out) ?? [];
    const base = /listening on (\S+)/.exec(out)?.[1] ?? '';
    const issued = await fetch(`${base}${hinted}`, { method, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(issued.status).to.equal(201);
    const { api_key } = (await issued.json()) as { api_key: string };
    expect((await fetch(`${base}/api/v1/tickets`, { headers: { authorization: `Bearer ${api_key}` } })).status).to.equal(200);
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('first-ticket.sh creates a ticket and long-polls its ticket.created from now', async () => {
    const result = await script('first-ticket.sh', { KEY: ws.apiKey });
    expect(result.code, result.stderr).to.equal(0);
    const ticket = JSON.parse(result.stdout.split('\n')[0] ?? '');
    const updates = lastJson(result.stdout);
    expect(updates.items.map((i: { data: { ticket_id?: string; id?: string } }) => i.data.ticket_id ?? i.data.id)).to.include(ticket.id);
    expect(updates.next_offset).to.equal(updates.items.at(-1).offset + 1);
  });

  it('first-ticket.sh without KEY stops at once, saying what to set', async () => {
    const result = await script('first-ticket.sh', {});
    expect(result.code).to.not.equal(0);
    expect(result.stderr).to.include('set KEY to your API key');
  });

  it('upload.sh uploads, downloads the same bytes through /api/v1/media/{id}, and attaches the file', async () => {
    const result = await script('upload.sh', { KEY: ws.apiKey });
    expect(result.code, result.stderr).to.equal(0);
    const media = JSON.parse(result.stdout.split('\n')[0] ?? '');
    expect(Object.keys(media)).to.deep.equal(['id', 'file_name', 'content_type', 'size', 'url']);
    expect(media).to.include({ file_name: 'note.txt', content_type: 'text/plain', size: 18 });
    expect(result.stdout).to.include(`downloaded ${media.id}: same bytes`);
    expect(lastJson(result.stdout).media[0].url).to.equal(media.url);
  });

  it('knowledge-base.sh moves an entry-plan workspace to team, then writes and lists an article', async () => {
    const fresh = await svc.createWorkspace();
    expect((await fresh.api('GET', '/api/v1/articles')).status).to.equal(403);
    const result = await script('knowledge-base.sh', { KEY: fresh.apiKey, WORKSPACE: fresh.workspaceId, ADMIN_TOKEN });
    expect(result.code, result.stderr).to.equal(0);
    const list = lastJson(result.stdout);
    expect(list).to.include({ page: 1, page_size: 20, total: 1 });
    expect(Object.keys(list.items[0])).to.have.members(['id', 'title', 'body', 'created_at', 'updated_at']);
    expect(list.items[0].body).to.equal('Open Settings, then Security, then Reset.');
  });

  it('new-api-key.sh issues a key that works; a wrong ADMIN_TOKEN fails the script', async () => {
    const fresh = await svc.createWorkspace();
    const result = await script('new-api-key.sh', { WORKSPACE: fresh.workspaceId, ADMIN_TOKEN });
    expect(result.code, result.stderr).to.equal(0);
    const { api_key } = lastJson(result.stdout);
    expect((await fetch(`${svc.url}/api/v1/tickets`, { headers: { authorization: `Bearer ${api_key}` } })).status).to.equal(200);
    expect((await script('new-api-key.sh', { WORKSPACE: fresh.workspaceId, ADMIN_TOKEN: 'wrong' })).code).to.not.equal(0);
  });

  it('rotate-webhook-secret.sh answers a new secret and when the old one stops signing; an unknown subscription or a grace period over 7 days fails it', async () => {
    const { id, secret } = await subscribe(ws, 'https://receiver.test/hook');
    const result = await script('rotate-webhook-secret.sh', { KEY: ws.apiKey, WEBHOOK: id, GRACE: '600' });
    expect(result.code, result.stderr).to.equal(0);
    const rotation = lastJson(result.stdout);
    expect(rotation.secret).to.match(/^whsec_/).and.not.equal(secret);
    expect(Date.parse(`${rotation.previous_secret_expires_at}Z`) - Date.now()).to.be.within(500_000, 600_000);
    expect((await script('rotate-webhook-secret.sh', { KEY: ws.apiKey, WEBHOOK: 'whk_unknown' })).code).to.not.equal(0);
    expect((await script('rotate-webhook-secret.sh', { KEY: ws.apiKey, WEBHOOK: id, GRACE: '604801' })).code).to.not.equal(0);
  });

  it('replay-webhook-history.sh sends the history again and follows it to the end; an unknown subscription fails it', async () => {
    const receiver = await startReceiver();
    try {
      // A workspace of its own: the others' events of the last hour stay out of the count.
      const own = await svc.createWorkspace();
      const { id } = await subscribe(own, receiver.url);
      for (let i = 0; i < 3; i++) await emit(svc, own.workspaceId);
      await receiver.waitForRequests(3);
      const result = await script('replay-webhook-history.sh', { KEY: own.apiKey, WEBHOOK: id });
      expect(result.code, result.stderr).to.equal(0);
      expect(lastJson(result.stdout)).to.include({ status: 'completed', matched: 3, sent: 3, delivered: 3, failed: 0 });
      await receiver.waitForRequests(6);
      // From an offset, as /updates gives them: nothing failed, so nothing to recover.
      const failedOnly = await script('replay-webhook-history.sh', { KEY: own.apiKey, WEBHOOK: id, SINCE: '0', ONLY_FAILED: 'true' });
      expect(lastJson(failedOnly.stdout)).to.include({ status: 'completed', matched: 0 });
      expect((await script('replay-webhook-history.sh', { KEY: own.apiKey, WEBHOOK: 'unknown' })).code).to.not.equal(0);
    } finally {
      await receiver.close();
    }
  });

  it('receive-webhook.ts verifies a real delivery and answers 401 to a forged one', async () => {
    const port = await freePort();
    const hooks = await svc.createWorkspace();
    const { secret } = await subscribe(hooks, `http://127.0.0.1:${port}/webhooks`);
    const receiver = program('receive-webhook.ts', { WEBHOOK_SECRET: secret, PORT: String(port) });
    await eventually('the receiver to listen', () => receiver.lines.some((l) => l.startsWith('listening on')), 20_000);
    const test = await hooks.api('POST', `/api/v1/webhooks/${(await hooks.api('GET', '/api/v1/webhooks')).body.items[0].id}/test`);
    expect(test.body).to.include({ delivered: true, status_code: 204 });
    await eventually('the verified line', () => receiver.lines.some((l) => l.startsWith('verified webhook.test')));
    const body = '{"id":"x","type":"ticket.created"}';
    const forged = await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', body, headers: { 'x-webhook-signature': `sha256=${createHmac('sha256', 'not-the-secret').update(body).digest('hex')}` } });
    expect(forged.status).to.equal(401);
  });

  it('receive-standard-webhook.ts verifies a real delivery with the official library and refuses a tampered one', async () => {
    const port = await freePort();
    const hooks = await svc.createWorkspace();
    const { id, secret } = await subscribe(hooks, `http://127.0.0.1:${port}/webhooks`);
    const receiver = program('receive-standard-webhook.ts', { WEBHOOK_SECRET: secret, PORT: String(port) });
    await eventually('the receiver to listen', () => receiver.lines.some((l) => l.startsWith('listening on')), 20_000);
    const test = await hooks.api('POST', `/api/v1/webhooks/${id}/test`);
    expect(test.body).to.include({ delivered: true, status_code: 204 });
    await eventually('the verified line', () => receiver.lines.some((l) => l.startsWith('verified webhook.test')));
    const body = '{"id":"x","type":"ticket.created"}';
    const headers = { 'webhook-id': 'msg_1', 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,AAAA' };
    expect((await fetch(`http://127.0.0.1:${port}/webhooks`, { method: 'POST', body, headers })).status).to.equal(401);
  });

  it('the five-minute guide: listen forwards a new ticket\'s events to receive-webhook.ts, verified', async () => {
    const port = await freePort();
    const secret = 'whsec_readme-guide';
    const receiver = program('receive-webhook.ts', { WEBHOOK_SECRET: secret, PORT: String(port) });
    await eventually('the receiver to listen', () => receiver.lines.some((l) => l.startsWith('listening on')), 20_000);
    const listen = startListen(['--key', ws.apiKey, '--forward-to', `http://localhost:${port}/webhooks`, '--secret', secret], { SUPPORT_PLATFORM_URL: svc.url });
    children.push(listen.child);
    await listen.waitFor(/^Forwarding events/);
    expect((await script('first-ticket.sh', { KEY: ws.apiKey })).code).to.equal(0);
    await eventually('ticket.created at the receiver', () => receiver.lines.some((l) => /^verified ticket\.created [0-9a-f]{32} at /.test(l)));
    await listen.waitFor(/ticket\.created +[0-9a-f]{32}  <-- \[204\]/);
  });

  /** A folder outside the repository that looks like a clone (its code linked in), to run the examples that use scripts/. */
  const cloneView = (): string => {
    const clone = mkdtempSync(path.join(tmpdir(), 'sp-clone-'));
    for (const entry of ['package.json', 'node_modules', 'scripts', 'src', 'projections']) symlinkSync(path.join(REPO, entry), path.join(clone, entry));
    for (const file of examples) copyFileSync(path.join(EXAMPLES, file), path.join(clone, file));
    return clone;
  };

  it('export-history.sh exports the key\'s workspace through the API while the service runs', async () => {
    const clone = cloneView();
    try {
      const created = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'history@example.test' } });
      const result = await runProcess('bash', ['export-history.sh'], { cwd: clone, env: env({ KEY: ws.apiKey }) });
      expect(result.code, result.stderr).to.equal(0);
      const lines = readFileSync(path.join(clone, 'tickets.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { type: string; data: { ticket_id: string } });
      expect(lines.map((l) => l.data.ticket_id)).to.include(created.body.id);
      expect(new Set(lines.map((l) => l.type))).to.deep.equal(new Set(['ticket.created']));
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  });

  it('export-log.sh exports and rebuilds from a stopped service\'s folder; an unknown WORKSPACE fails it', async () => {
    const clone = cloneView();
    const stopped = await startTestService({}, { dataDir: path.join(clone, 'data') });
    try {
      const mine = await stopped.createWorkspace();
      await mine.api('POST', '/api/v1/tickets', { contact: { email: 'log@example.test' } });
      await stopped.service.close();
      const result = await runProcess('bash', ['export-log.sh'], { cwd: clone, env: env({ WORKSPACE: mine.workspaceId }) });
      expect(result.code, result.stderr).to.equal(0);
      const lines = readFileSync(path.join(clone, 'history.ndjson'), 'utf8').trim().split('\n');
      expect(lines.map((l) => (JSON.parse(l) as { type: string }).type)).to.include('ticket.created');
      expect(result.stdout).to.match(/^1$/m).and.match(/^tickets: 1 documents$/m);
      const unknown = await runProcess('bash', ['export-log.sh'], { cwd: clone, env: env({ WORKSPACE: 'nope' }) });
      expect(unknown.code).to.equal(1);
      expect(unknown.stderr).to.include('export failed: no workspace nope');
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  });

  it('poll-updates.ts prints events from OFFSET and stops after STOP_AFTER', async () => {
    const result = await run(path.join(BIN, 'tsx'), ['poll-updates.ts'], { KEY: ws.apiKey, OFFSET: '0', STOP_AFTER: '1' });
    expect(result.code, result.stderr).to.equal(0);
    expect(result.stdout).to.match(/^\d{4}-\d\d-\d\dT[\d:.]+\+00:00 [a-z_.]+ [0-9a-f]{32} \{/);
  });

  it('poll-updates.ts stops with the API\'s answer on a wrong key', async () => {
    const result = await run(path.join(BIN, 'tsx'), ['poll-updates.ts'], { KEY: 'sk_wrong' });
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include('GET /api/v1/updates answered 401');
  });
});
