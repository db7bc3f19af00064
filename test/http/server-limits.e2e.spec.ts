// The connection layer against hostile clients, byte for byte: requests Node's parser refuses are
// answered in the short error form with a request id, slow clients are cut at the header and request
// deadlines, 10,000 idle connections neither stop service nor stay open forever, and connections that
// arrive while the process does not run wait for it in the listen queue instead of being dropped.
import { expect } from 'chai';
import { mkdtempSync } from 'node:fs';
import { readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { rawRequest, type RawAnswer } from '../support/raw-http.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/server.js';

const expectRefusal = (answer: RawAnswer, status: number, reason: string) => {
  expect(answer.status, answer.body).to.equal(status);
  expect(JSON.parse(answer.body)).to.deep.equal({ detail: `${reason}: the request could not be read as HTTP` });
  expect(answer.headers['content-type']).to.equal('application/json; charset=utf-8');
  expect(answer.headers['x-request-id']).to.match(/^[0-9a-f]{32}$/);
  expect(answer.headers['connection']).to.equal('close');
};

describe('HTTP connection limits (e2e)', function () {
  this.timeout(30_000);
  let ts: TestService;

  before(async () => {
    ts = await startTestService({ HTTP_HEADERS_TIMEOUT_MS: '800', HTTP_REQUEST_TIMEOUT_MS: '1500' });
  });
  after(() => ts.close());

  it('answers requests the parser refuses in the short form with a request id', async () => {
    const malformed: [string, number, string][] = [
      ['GET /healthz HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n', 400, 'Bad Request'],
      ['POST /api/v1/tickets HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab', 400, 'Bad Request'],
      ['POST /api/v1/tickets HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'Bad Request'],
      ['G@T /healthz HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'Bad Request'],
      ['GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n', 400, 'Bad Request'],
      [`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(17 * 1024)}\r\n\r\n`, 431, 'Request Header Fields Too Large'],
    ];
    for (const [request, status, reason] of malformed) expectRefusal(await rawRequest(ts.url, { parts: [Buffer.from(request, 'latin1')] }), status, reason);
    expect((await fetch(`${ts.url}/healthz`)).status).to.equal(200);
  });

  it('answers a HEAD request the parser refuses without a body (its length still said), as HTTP has it', async () => {
    const answer = await rawRequest(ts.url, { parts: [Buffer.from(`HEAD /api/v1/articles/${'a'.repeat(9000)}?page=${'9'.repeat(9000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 'latin1')] });
    expect(answer.status).to.equal(431);
    expect(answer.closedByServer).to.equal(true);
    expect(Number(answer.headers['content-length'])).to.be.greaterThan(0);
    expect(answer.body, 'no byte after the headers').to.equal('');
  });

  it('cuts a client that sends its headers too slowly with 408, and serves others meanwhile', async () => {
    const slow = rawRequest(ts.url, { parts: ['GET /healthz HTTP/1.1\r\n', 'Host: x\r\n'], waitMs: 10_000 });
    expect((await fetch(`${ts.url}/healthz`)).status).to.equal(200);
    const answer = await slow;
    expectRefusal(answer, 408, 'Request Timeout');
    expect(answer.elapsedMs).to.be.below(5_000);
  });

  it('cuts a JSON body that stalls at the request deadline with 408', async () => {
    const ws = await ts.createWorkspace();
    const answer = await rawRequest(ts.url, {
      parts: [`POST /api/v1/tickets HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ws.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"subj`],
      waitMs: 10_000,
    });
    expectRefusal(answer, 408, 'Request Timeout');
    expect(answer.elapsedMs).to.be.below(6_000);
  });

  it('does not cut a long poll: its wait is not part of receiving the request', async () => {
    const ws = await ts.createWorkspace();
    const started = Date.now();
    const reply = await ws.api('GET', `/api/v1/updates?offset=${(Date.now() + 3_600_000) * 1000}&timeout=3`);
    expect(reply.status).to.equal(200);
    expect(Date.now() - started).to.be.at.least(2_500);
  });
});

describe('10,000 idle connections (e2e, separate server process)', function () {
  this.timeout(180_000);
  const IDLE = 10_000;
  // Six times what opening 10,000 connections takes here alone (about 2 s): beside the other test
  // lane and a busy loop it took over 6 s, and half of them were cut before the requests below were
  // served. Each connection's own lifetime is checked against it, so a slower machine cuts the first
  // ones early, never wrongly.
  const HEADER_DEADLINE_MS = 12_000;
  let group: ProcessGroup;
  const sockets: Socket[] = [];

  before(() => {
    group = createProcessGroup({ DATA_DIR: mkdtempSync(path.join(tmpdir(), 'sp-idle-')), ADMIN_TOKEN, HTTP_HEADERS_TIMEOUT_MS: String(HEADER_DEADLINE_MS) });
  });
  after(async function () {
    for (const socket of sockets) socket.destroy();
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
    await group.stopAll();
  });

  it('keeps serving while they are open, then closes them at the header deadline', async () => {
    const server = await group.start('idle', {});
    const { port } = new URL(server.url);
    let closed = 0;
    // How long each connection the server closed before its header deadline had lived (0: refused),
    // less a second for this busy process to see its connect late.
    const cutEarly: number[] = [];
    // In batches, so the listen backlog is not what is being tested.
    for (let opened = 0; opened < IDLE; opened += 500) {
      const batch = Math.min(500, IDLE - opened);
      await Promise.all(
        Array.from({ length: batch }, () => {
          const socket = connect(Number(port), '127.0.0.1');
          sockets.push(socket);
          socket.on('error', () => undefined);
          socket.resume(); // read, or the server's closing is never seen
          let connectedAt: number | undefined;
          return new Promise((resolve) => {
            socket.once('connect', () => resolve((connectedAt = performance.now())));
            socket.on('close', () => {
              closed += 1;
              const lived = connectedAt === undefined ? 0 : performance.now() - connectedAt;
              if (lived < HEADER_DEADLINE_MS - 1_000) cutEarly.push(Math.round(lived));
              resolve(undefined);
            });
          });
        }),
      );
    }

    const ws = await fetch(`${server.url}/admin/v1/workspaces`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'busy' }),
    });
    expect(ws.status).to.equal(201);
    const { api_key: key } = (await ws.json()) as { api_key: string };
    const listed = await fetch(`${server.url}/api/v1/tickets`, { headers: { authorization: `Bearer ${key}` } });
    expect(listed.status).to.equal(200);
    expect(IDLE - closed, 'connections open while those requests were served').to.be.above(IDLE / 2);

    const deadline = Date.now() + 90_000;
    while (closed < IDLE && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(closed, 'idle connections the server closed').to.equal(IDLE);
    expect(cutEarly, 'connections closed before the header deadline (ms they lived)').to.deep.equal([]);
    expect((await fetch(`${server.url}/healthz`)).status).to.equal(200);
  });
});

describe('connections while the process does not run (listen backlog, e2e)', function () {
  this.timeout(60_000);
  // More than Node's default backlog (511), which the kernel would overflow: a dropped handshake
  // waits for the client's SYN retransmit, 1 s and then 3 s later, while the process is still stopped.
  const ARRIVALS = 1_500;
  const STOPPED_MS = 4_000;
  let group: ProcessGroup;
  const sockets: Socket[] = [];

  before(function () {
    // The kernel caps the backlog at net.core.somaxconn: below the arrivals it cannot hold them all.
    if (Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8')) < ARRIVALS) this.skip();
    group = createProcessGroup({ DATA_DIR: mkdtempSync(path.join(tmpdir(), 'sp-backlog-')), ADMIN_TOKEN });
  });
  after(async function () {
    for (const socket of sockets) socket.destroy();
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
    await group?.stopAll();
  });

  it('completes every handshake while the process is stopped, and answers each once it runs again', async () => {
    const server = await group.start('stopped', {});
    const { port } = new URL(server.url);
    // SIGSTOP: as an event loop held by a long synchronous task, nothing is accepted meanwhile.
    server.kill('SIGSTOP');
    let connected = 0;
    let connectedWhileStopped: number;
    const answers: Promise<string>[] = [];
    try {
      for (let i = 0; i < ARRIVALS; i++) {
        const socket = connect(Number(port), '127.0.0.1');
        sockets.push(socket);
        socket.on('error', () => undefined);
        socket.once('connect', () => void connected++);
        socket.write('GET /healthz HTTP/1.1\r\nHost: backlog\r\nConnection: close\r\n\r\n');
        answers.push(
          new Promise((resolve) => {
            let text = '';
            socket.on('data', (chunk: Buffer) => void (text += chunk.toString('latin1')));
            socket.once('close', () => resolve(text.split('\r\n')[0] ?? ''));
          }),
        );
      }
      const until = Date.now() + STOPPED_MS;
      while (connected < ARRIVALS && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      connectedWhileStopped = connected;
    } finally {
      server.kill('SIGCONT');
    }
    expect(connectedWhileStopped, 'handshakes completed while the process was stopped').to.equal(ARRIVALS);
    const statusLines = await Promise.all(answers);
    expect(statusLines.filter((line) => line !== 'HTTP/1.1 200 OK'), 'answers other than 200').to.deep.equal([]);
  });
});
