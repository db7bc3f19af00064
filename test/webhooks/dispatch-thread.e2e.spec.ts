// The embedded role's delivery engine runs in a worker thread (src/webhooks/dispatch/thread.ts): a
// main thread whose event loop is blocked does not hold deliveries back, a worker that dies is started
// again without losing a delivery, /readyz names it while it is down, and the data folder still takes
// one embedded service at a time.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { threadId } from 'node:worker_threads';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN_TOKEN, call, startTestService, type TestService } from '../support/server.js';
import { FAST_RETRIES, emit, eventIdOf, eventually, subscribe } from '../support/webhooks-dispatch.js';

/** A receiver in another process (this one's event loop is about to be blocked): one line per request, `<arrival ms> <body>`. */
const RECEIVER = `
const server = require('node:http').createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => { console.log(Date.now() + ' ' + Buffer.concat(chunks).toString('utf8')); res.end('ok'); });
});
server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));
`;

interface ProcessReceiver {
  readonly url: string;
  readonly arrivals: { readonly at: number; readonly eventId: string }[];
  close(): void;
}

const startProcessReceiver = async (): Promise<ProcessReceiver> => {
  const child: ChildProcess = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  const arrivals: { at: number; eventId: string }[] = [];
  const lines = createInterface({ input: child.stdout! });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`receiver exited with ${code}`)));
    lines.on('line', (line) => {
      if (line.startsWith('port ')) return resolve(Number(line.slice(5)));
      const space = line.indexOf(' ');
      arrivals.push({ at: Number(line.slice(0, space)), eventId: String((JSON.parse(line.slice(space + 1)) as { id: string }).id) });
    });
  });
  return { url: `http://127.0.0.1:${port}/hook`, arrivals, close: () => void child.kill('SIGKILL') };
};

const busyFor = (ms: number): { from: number; to: number } => {
  const from = Date.now();
  while (Date.now() - from < ms) {
    // The main thread's event loop does nothing else meanwhile: no timer, no I/O, no request.
  }
  return { from, to: Date.now() };
};

describe('webhook delivery in its worker thread (e2e)', () => {
  let test: TestService | undefined;
  let receiver: Receiver | undefined;
  let processReceiver: ProcessReceiver | undefined;

  afterEach(async () => {
    processReceiver?.close();
    await receiver?.close();
    await test?.close();
    test = undefined;
    receiver = undefined;
    processReceiver = undefined;
  });

  it('delivers while the main thread is blocked for 2 s: the engine does not share its event loop', async () => {
    processReceiver = await startProcessReceiver();
    test = await startTestService(FAST_RETRIES);
    const ws = await test.createWorkspace();
    await subscribe(ws, processReceiver.url);
    const thread = test.service.dispatcherThread;
    expect(thread?.threadId()).to.be.a('number').and.not.equal(threadId);

    const event = await emit(test, ws.workspaceId);
    const blocked = busyFor(2000);

    const arrival = await eventually('the delivery', () => processReceiver?.arrivals.find((a) => a.eventId === event.id));
    expect(arrival.at, 'received while the main thread was blocked').to.be.within(blocked.from, blocked.to);
  });

  it('starts a killed worker again, names it in /readyz meanwhile, and loses no delivery', async () => {
    receiver = await startReceiver();
    test = await startTestService(FAST_RETRIES);
    const ws = await test.createWorkspace();
    await subscribe(ws, receiver.url);
    const thread = test.service.dispatcherThread!;
    const first = thread.threadId();

    const events: RecordedEvent[] = [];
    for (let i = 0; i < 20; i++) events.push(await emit(test, ws.workspaceId));
    await thread.kill();
    const down = await call(`${test.url}/readyz`, 'GET', null);
    expect(down.status).to.equal(503);
    expect(JSON.stringify(down.body)).to.include('webhook-dispatcher');
    // The metrics still answer, without a heap figure for a thread that is not there.
    const metrics = await fetch(`${test.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(metrics.status).to.equal(200);
    expect(await metrics.text()).to.not.include('nodejs_worker_heap_size_used_bytes{');
    for (let i = 0; i < 20; i++) events.push(await emit(test, ws.workspaceId));

    await thread.running();
    expect(thread.threadId()).to.be.a('number').and.not.equal(first);
    expect((await call(`${test.url}/readyz`, 'GET', null)).status).to.equal(200);
    await eventually('every event delivered', () => {
      const received = new Set(receiver!.requests.map(eventIdOf));
      return events.every((e) => received.has(e.id));
    });
  });

  it('starts the worker again when its history index thread dies, and the history still shows every delivery', async () => {
    receiver = await startReceiver();
    test = await startTestService(FAST_RETRIES);
    const ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    const thread = test.service.dispatcherThread!;
    const first = thread.threadId();

    const events: RecordedEvent[] = [];
    for (let i = 0; i < 10; i++) events.push(await emit(test, ws.workspaceId));
    thread.killIndex();
    await eventually('the worker ended with its index thread', () => thread.threadId() !== first);
    for (let i = 0; i < 10; i++) events.push(await emit(test, ws.workspaceId));

    await thread.running();
    expect(thread.threadId()).to.be.a('number').and.not.equal(first);
    await eventually('every event delivered', () => {
      const received = new Set(receiver!.requests.map(eventIdOf));
      return events.every((e) => received.has(e.id));
    });
    await eventually('every delivery listed as delivered', async () => {
      const page = await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?page_size=100&status=delivered`);
      expect(page.status, JSON.stringify(page.body)).to.equal(200);
      const listed = new Set((page.body.items as { event_id: string }[]).map((d) => d.event_id));
      return events.every((e) => listed.has(e.id));
    });
  });

  it('cancels an attempt in flight in the worker when the subscription is deleted', async () => {
    receiver = await startReceiver();
    receiver.respond({ kind: 'hang' });
    test = await startTestService({ ...FAST_RETRIES, WEBHOOK_TIMEOUT_MS: '20000' });
    const ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    await emit(test, ws.workspaceId);
    await receiver.waitForRequests(1);

    expect((await ws.api('DELETE', `/api/v1/webhooks/${sub.id}`)).status).to.equal(204);
    // Stopping waits for the attempts in flight: the hanging one would hold it for its 20 s timeout.
    const stopping = Date.now();
    await test.close();
    test = undefined;
    expect(Date.now() - stopping).to.be.below(5000);
  });

  it('refuses a second embedded service on the same data folder while the first runs', async () => {
    test = await startTestService();
    let refusal: unknown = null;
    try {
      await (await startTestService({}, { dataDir: test.dataDir })).close();
    } catch (error) {
      refusal = error;
    }
    expect(String(refusal)).to.match(/in use by another process/);
    // The first one still serves.
    expect((await call(`${test.url}/readyz`, 'GET', null)).status).to.equal(200);
  });
});
