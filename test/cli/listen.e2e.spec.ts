// The listen command end to end: the real service, real receivers, and the command in a child
// process as a user runs it (bin/support-platform.mjs). A small fake API stands in for the service
// only where the real one cannot be made to answer 429 and 503 on demand.
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { randomId } from '../../src/shared/ids.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startListen, type ListenProcess } from '../support/listen-process.js';
import { runProcess } from '../support/run-process.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { emit, eventIdOf, eventually, header, subscribe } from '../support/webhooks-dispatch.js';
import { ticketUpdated } from '../support/updates-events.js';

/** In the Standard Webhooks form (whsec_ + base64 of 32 bytes), as the service makes them. */
const SECRET = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;

describe('listen: forwarding /updates to a local URL (e2e)', function () {
  this.timeout(60_000);
  let test: TestService;
  let ws: TestWorkspace;
  let receivers: Receiver[] = [];
  let processes: ListenProcess[] = [];
  let dir: string;

  before(async () => {
    test = await startTestService();
  });
  after(async () => {
    await test.close();
  });
  beforeEach(async () => {
    ws = await test.createWorkspace();
    dir = mkdtempSync(path.join(tmpdir(), 'sp-listen-'));
  });
  afterEach(async () => {
    await Promise.all(processes.map((p) => p.stop('SIGKILL')));
    await Promise.all(receivers.map((r) => r.close()));
    [processes, receivers] = [[], []];
    rmSync(dir, { recursive: true, force: true });
  });

  const receiver = async (port?: number): Promise<Receiver> => {
    const r = await startReceiver('127.0.0.1', port);
    receivers.push(r);
    return r;
  };
  const listen = async (target: string, ...args: string[]): Promise<ListenProcess> => {
    const p = startListen(['--url', test.url, '--forward-to', target, '--secret', SECRET, ...args], { SUPPORT_PLATFORM_API_KEY: ws.apiKey });
    processes.push(p);
    await p.waitFor(/^Forwarding events from offset/);
    return p;
  };
  const feedIds = async (): Promise<string[]> => {
    const page = await ws.api('GET', '/api/v1/updates?offset=0&timeout=0&limit=1000');
    return (page.body.items as { id: string }[]).map((item) => item.id);
  };
  const emitMany = async (n: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let i = 0; i < n; i += 1) ids.push((await emit(test, ws.workspaceId, ticketUpdated(randomId()))).id);
    return ids;
  };

  it('forwards the bytes and headers of a real webhook delivery of the same event, both signatures with the local secret', async () => {
    const [hooks, local] = [await receiver(), await receiver()];
    const { secret } = await subscribe(ws, hooks.url);
    const p = await listen(local.url);
    const created = await ws.api('POST', '/api/v1/tickets', { subject: 'Ünïcode ✓ "quotes"', contact: { email: 'a@example.test', full_name: 'Zoë' }, message: 'héllo\n<b>' });
    expect(created.status).to.equal(201);
    const ids = await feedIds();
    const [delivered, forwarded] = await Promise.all([hooks.waitForRequests(ids.length), local.waitForRequests(ids.length)]);
    const byEvent = (requests: ReceivedRequest[]) => new Map(requests.map((r) => [eventIdOf(r), r]));
    const [real, ours] = [byEvent(delivered), byEvent(forwarded)];
    for (const id of ids) {
      const [a, b] = [real.get(id), ours.get(id)];
      if (a === undefined || b === undefined) throw new Error(`event ${id} missing`);
      expect(b.body.equals(a.body), `body of ${id}`).to.equal(true);
      for (const name of ['content-type', 'x-webhook-event', 'x-webhook-attempt', 'user-agent']) expect(header(b, name), name).to.equal(header(a, name));
      expect(verifySignature(secret, a.body, header(a, 'x-webhook-signature'))).to.equal(true);
      expect(verifySignature(SECRET, b.body, header(b, 'x-webhook-signature'))).to.equal(true);
      expect(verifySignature(secret, b.body, header(b, 'x-webhook-signature'))).to.equal(false);
      expect(header(b, 'x-webhook-id')).to.match(/^[0-9a-f]{32}$/);
      const signed = (r: ReceivedRequest) => Object.keys(r.headers).filter((name) => /^(x-)?webhook-|^content-type$|^user-agent$/.test(name)).sort();
      expect(signed(b)).to.deep.equal(signed(a));
      expect(header(b, 'webhook-id')).to.equal(header(b, 'x-webhook-id'));
      const standard = { 'webhook-id': header(b, 'webhook-id'), 'webhook-timestamp': header(b, 'webhook-timestamp'), 'webhook-signature': header(b, 'webhook-signature') };
      expect(new Webhook(SECRET).verify(b.body, standard)).to.deep.equal(JSON.parse(b.body.toString('utf8')));
      expect(() => new Webhook(secret).verify(b.body, standard)).to.throw();
    }
    expect(forwarded.map(eventIdOf)).to.deep.equal(ids);
    await p.waitFor(new RegExp(`ticket\\.created +${ids[0]}  <-- \\[200\\] \\d+ ms$`));
  });

  it('prints the secret it made when none is given, and signs with it', async () => {
    const local = await receiver();
    const p = startListen(['--url', test.url, '--key', ws.apiKey, '--forward-to', local.url]);
    processes.push(p);
    const secret = /is (whsec_\S+)$/.exec(await p.waitFor(/signing secret is whsec_/))?.[1] ?? '';
    await p.waitFor(/^Forwarding/);
    await emitMany(1);
    const [request] = await local.waitForRequests(1);
    expect(verifySignature(secret, request!.body, header(request!, 'x-webhook-signature'))).to.equal(true);
  });

  it('forwards only the --types asked for', async () => {
    const local = await receiver();
    const p = await listen(local.url, '--types', 'ticket.closed, ticket.created');
    const created = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'b@example.test' } });
    await emitMany(2); // ticket.updated: not asked for
    await ws.api('POST', `/api/v1/tickets/${created.body.id}/close`, {});
    await p.waitFor(/ticket\.closed/);
    expect(local.requests.map((r) => header(r, 'x-webhook-event'))).to.deep.equal(['ticket.created', 'ticket.closed']);
  });

  it('starts from now by default, from 0 with the whole history, or from a given offset', async () => {
    const before = await emitMany(3);
    const [fromNow, fromZero, fromOffset] = [await receiver(), await receiver(), await receiver()];
    await listen(fromNow.url);
    await listen(fromZero.url, '--from', '0');
    const page = await ws.api('GET', '/api/v1/updates?offset=0&timeout=0');
    await listen(fromOffset.url, '--from', String(page.body.items[1].offset));
    const after = await emitMany(1);
    await Promise.all([fromNow.waitForRequests(1), fromZero.waitForRequests(4), fromOffset.waitForRequests(3)]);
    expect(fromNow.requests.map(eventIdOf)).to.deep.equal(after);
    expect(fromZero.requests.map(eventIdOf)).to.deep.equal([...before, ...after]);
    expect(fromOffset.requests.map(eventIdOf)).to.deep.equal([...before.slice(1), ...after]);
  });

  it('with --state, a restart after Ctrl-C skips nothing and repeats nothing', async () => {
    const local = await receiver();
    const state = path.join(dir, 'listen.json');
    const first = await listen(local.url, '--state', state, '--from', '0');
    const early = await emitMany(3);
    await local.waitForRequests(3);
    expect(await first.stop('SIGINT')).to.equal(0);
    const saved = JSON.parse(readFileSync(state, 'utf8')).offset as number;
    const late = await emitMany(3); // while nothing listens
    // --from now would skip the late events: the state file wins over it.
    await listen(local.url, '--state', state, '--from', 'now');
    await local.waitForRequests(6);
    expect(local.requests.map(eventIdOf)).to.deep.equal([...early, ...late]);
    const page = await ws.api('GET', `/api/v1/updates?offset=0&timeout=0`);
    expect(saved).to.equal(page.body.items[2].offset + 1);
  });

  it('refuses a state file that is not one, naming it', async () => {
    const state = path.join(dir, 'not-state.json');
    writeFileSync(state, '{"position": 3}');
    const p = startListen(['--url', test.url, '--key', ws.apiKey, '--forward-to', 'http://127.0.0.1:9/', '--state', state]);
    processes.push(p);
    expect(await p.exited).to.equal(2);
    expect(p.notices.join('\n')).to.include(`${state} is not a listen state file`);
  });

  it('keeps retrying the same event while the target is down, then delivers every event in order', async () => {
    const probe = await startReceiver();
    const port = probe.port;
    await probe.close(); // nothing listens on this port now
    const p = await listen(`http://127.0.0.1:${port}/hook`);
    const ids = await emitMany(3);
    await p.waitFor(/did not answer attempt 2 \(connection refused/);
    const local = await receiver(port);
    await local.waitForRequests(3);
    expect(local.requests.map(eventIdOf)).to.deep.equal(ids);
    expect(Number(header(local.requests[0]!, 'x-webhook-attempt'))).to.be.greaterThan(2);
    expect(local.requests.slice(1).map((r) => header(r, 'x-webhook-attempt'))).to.deep.equal(['1', '1']);
  });

  it('treats any HTTP answer as final: a 500 is printed and the next event goes on', async () => {
    const local = await receiver();
    local.respondOnce({ kind: 'status', status: 500 });
    const p = await listen(local.url);
    const ids = await emitMany(2);
    await local.waitForRequests(2);
    expect(local.requests.map(eventIdOf)).to.deep.equal(ids);
    await p.waitFor(new RegExp(`${ids[0]}  <-- \\[500\\]`));
  });

  it('on Ctrl-C while the target is down, exits 0 and keeps the undelivered event for the next run', async () => {
    const state = path.join(dir, 'down.json');
    const p = await listen('http://127.0.0.1:9/hook', '--state', state);
    const startedAt = JSON.parse(readFileSync(state, 'utf8')).offset as number;
    const [id] = await emitMany(1);
    await p.waitFor(/did not answer attempt 1/);
    expect(await p.stop('SIGINT')).to.equal(0);
    expect(JSON.parse(readFileSync(state, 'utf8')).offset).to.equal(startedAt);
    const local = await receiver();
    await listen(local.url, '--state', state);
    const [request] = await local.waitForRequests(1);
    expect(eventIdOf(request!)).to.equal(id);
  });

  it('on Ctrl-C while an event is in flight, waits for its answer, prints it and saves past it', async () => {
    const local = await receiver();
    local.respondOnce({ kind: 'delay', ms: 1500, status: 202 });
    const state = path.join(dir, 'inflight.json');
    const p = await listen(local.url, '--state', state);
    const [id] = await emitMany(1);
    await local.waitForRequests(1);
    expect(await p.stop('SIGINT')).to.equal(0);
    expect(p.lines.join('\n')).to.match(new RegExp(`${id}  <-- \\[202\\]`));
    const page = await ws.api('GET', '/api/v1/updates?offset=0&timeout=0');
    expect(JSON.parse(readFileSync(state, 'utf8')).offset).to.equal(page.body.items[0].offset + 1);
  });

  it('keeps waiting for an API that is not up, saying why, and Ctrl-C still stops it cleanly', async () => {
    const probe = await startReceiver();
    const port = probe.port;
    await probe.close();
    const local = await receiver();
    const p = startListen(['--url', `http://127.0.0.1:${port}`, '--key', 'k', '--forward-to', local.url]);
    processes.push(p);
    await p.waitFor(/GET \/api\/v1\/updates: unreachable \(ECONNREFUSED\); retrying in 1\.0 s/);
    expect(p.child.exitCode).to.equal(null);
    expect(await p.stop('SIGINT')).to.equal(0);
  });

  it('stops with exit code 1 and the API\'s answer when the key is refused', async () => {
    const p = startListen(['--url', test.url, '--key', 'sk_wrong', '--forward-to', 'http://127.0.0.1:9/']);
    processes.push(p);
    expect(await p.exited).to.equal(1);
    expect(p.notices.join('\n')).to.match(/GET \/api\/v1\/updates answered 401/);
  });

  it('refuses a bad command line with exit code 2 and the usage', async () => {
    for (const args of [['--forward-to', 'http://127.0.0.1:9/'], ['--key', 'k', '--forward-to', 'ftp://x'], ['--key', 'k', '--forward-to', 'http://x/', '--types', 'ticket.nope'], ['--key', 'k', '--forward-to', 'http://x/', '--from', 'yesterday']]) {
      const p = startListen(args);
      expect(await p.exited, args.join(' ')).to.equal(2);
      expect(p.notices.join('\n')).to.match(/SUPPORT_PLATFORM_API_KEY|absolute http|unknown event types: ticket\.nope|--from must be now/).and.include('Usage: support-platform listen');
    }
  });

  it('runs from the clone as `npx support-platform listen` and `npm run listen`', async () => {
    const env = { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '' };
    for (const [command, args] of [['npx', ['--no-install', 'support-platform', 'listen', '--help']], ['npm', ['run', '-s', 'listen', '--', '--help']]] as const) {
      const result = await runProcess(command, args, { env });
      expect(result.code, `${command}: ${result.stderr}`).to.equal(0);
      expect(result.stdout).to.include('Usage: support-platform listen');
    }
    const unknown = await runProcess('npx', ['--no-install', 'support-platform', 'lisen'], { env });
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include('unknown command "lisen"').and.include('Commands:');
  });

  it('--help prints the usage and exits 0', async () => {
    const p = startListen(['--help']);
    expect(await p.exited).to.equal(0);
    expect(p.lines.join('\n')).to.include('--state FILE');
  });

  describe('against an API that answers 429 and 503', () => {
    let api: Server;
    let apiUrl: string;
    const asked: { at: number; offset: string | null }[] = [];
    const item = { id: randomId(), type: 'ticket.updated', timestamp: '2026-11-21T23:40:12.123456+00:00', workspace_id: 'w', data: { ticket_id: 't' }, _links: {}, offset: 1763768412123456 };
    before(async () => {
      const answers = [
        { status: 429, headers: { 'retry-after': '1' }, body: { error_code: 'RATE_LIMIT_EXCEEDED' } },
        { status: 503, headers: {}, body: { error_code: 'SERVICE_UNAVAILABLE' } },
        { status: 200, headers: {}, body: { items: [item], next_offset: item.offset + 1 } },
      ];
      api = createServer((request, response) => {
        asked.push({ at: Date.now(), offset: new URL(request.url ?? '/', 'http://x').searchParams.get('offset') });
        const answer = answers.shift() ?? { status: 200, headers: {}, body: { items: [], next_offset: item.offset + 1 } };
        response.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(JSON.stringify(answer.body));
      });
      await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
      apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((resolve) => api.close(() => resolve())));

    it('waits Retry-After on 429, backs off on 503, then forwards the page and moves its offset on', async () => {
      const local = await receiver();
      const p = startListen(['--url', apiUrl, '--key', 'k', '--forward-to', local.url, '--from', '5']);
      processes.push(p);
      await local.waitForRequests(1);
      expect(eventIdOf(local.requests[0]!)).to.equal(item.id);
      await eventually('the next poll', () => asked.length >= 4);
      expect(asked.map((a) => a.offset)).to.deep.equal(['5', '5', '5', String(item.offset + 1), ...asked.slice(4).map((a) => a.offset)]);
      // Retry-After: 1 is honoured: the retry comes no sooner (a lower bound, not a timing).
      expect(asked[1]!.at - asked[0]!.at).to.be.at.least(950);
      expect(p.notices.join('\n')).to.include('rate limited (429); retrying in 1.0 s').and.include('HTTP 503; retrying in 1.0 s');
    });
  });
});
