// Backpressure in the embedded service (src/webhooks/dispatch/backpressure.ts, src/http/middleware/
// write-hold.ts): while the delivery thread is behind on due attempts AND busy, writes of workspaces
// with subscriptions wait (never refused, never lost); reads, DELETEs, workspaces without
// subscriptions and a slow receiver's backlog never hold anything; a hold ends with the pressure, at
// its bound, or at once when the delivery thread dies; a write whose client closed it meanwhile is
// not carried out, and is no error of the server. Counted at /admin/v1/metrics.
import * as http from 'node:http';
import { expect } from 'chai';
import { heldWritesIn } from '../support/held-writes.js';
import { startReceiver } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { FAST_RETRIES, closedAfterEach, emit, metricLines, eventually, settle, subscribe } from '../support/webhooks-dispatch.js';

const ticket = { contact: { email: 'held@example.com' }, subject: 'Held?', message: 'Is this write held?' };

describe('webhook delivery backpressure: writes wait for a busy delivery thread (e2e)', () => {
  const started = closedAfterEach();

  /** The held writes so far, from the metrics route. */
  const held = async () => heldWritesIn((await metricLines(started.test!, /^http_writes_held_/)).join('\n'));

  /**
   * A service whose one subscription's receiver answers after 400 ms, one attempt in flight at a
   * time: events emitted now leave attempts waiting, the earliest later and later.
   */
  const behindSlowReceiver = async (env: Record<string, string> = {}): Promise<{ service: TestService; ws: TestWorkspace; quiet: TestWorkspace }> => {
    const slow = (started.receiver = await startReceiver());
    slow.respond({ kind: 'delay', ms: 400, status: 200 });
    const service = (started.test = await startTestService({ ...FAST_RETRIES, WEBHOOK_MAX_IN_FLIGHT: '1', ...env }));
    const ws = await service.createWorkspace();
    const quiet = await service.createWorkspace();
    await subscribe(ws, slow.url);
    for (let i = 0; i < 6; i++) await emit(service, ws.workspaceId);
    await eventually('the earliest waiting attempt late by 200 ms', async () => {
      const backlog = (await service.admin('GET', '/admin/v1/webhooks/backlog')).body as { oldest_due_seconds: number };
      return backlog.oldest_due_seconds > 0.2;
    });
    return { service, ws, quiet };
  };

  /** Writes of `ws` until one is held (the delivery thread looks every 20 ms). */
  const untilHeld = async (ws: TestWorkspace): Promise<void> => {
    await eventually('a held write', async () => {
      const before = (await held()).requests;
      expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
      return (await held()).requests > before;
    }, 5_000);
  };

  it('holds no write for a slow receiver: its attempts are late, but the delivery thread waits idle', async () => {
    const { ws } = await behindSlowReceiver();
    for (let i = 0; i < 5; i++) expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
    expect(await held()).to.deep.equal({ requests: 0, seconds: 0 });
  });

  it('holds writes of a workspace with subscriptions while the thread is behind and busy, and nothing else', async function () {
    this.timeout(40_000);
    const { service, ws, quiet } = await behindSlowReceiver({ WEBHOOK_BACKPRESSURE_MAX_HOLD_MS: '200' });
    const thread = service.service.dispatcherThread!;
    thread.busy(5_000);
    await untilHeld(ws);
    const figures = await held();
    expect(figures.seconds).to.be.greaterThan(0);

    // Meanwhile: a workspace without subscriptions, reads and DELETEs go at once; a held write is
    // answered as any other, its ticket there.
    const created = await quiet.api('POST', '/api/v1/tickets', ticket);
    expect(created.status).to.equal(201);
    expect((await quiet.api('GET', `/api/v1/tickets/${created.body.id}`)).status).to.equal(200);
    expect((await ws.api('GET', '/api/v1/tickets')).status).to.equal(200);
    const subscription = await ws.api('POST', '/api/v1/webhooks', { url: started.receiver!.url });
    expect(subscription.status).to.equal(201);
    expect((await ws.api('DELETE', `/api/v1/webhooks/${subscription.body.id}`)).status).to.equal(204);
    const after = await held();
    // The POST /webhooks above was a write of the pressed workspace: held as one.
    expect(after.requests).to.equal(figures.requests + 1);
    // Each held for at most its bound (200 ms), with the pressure lasting seconds.
    expect(after.seconds - figures.seconds).to.be.at.most(1);

    // Once the thread is no longer busy, nothing waits.
    await eventually('writes no longer held', async () => {
      const before = (await held()).requests;
      expect((await ws.api('POST', '/api/v1/tickets', ticket)).status).to.equal(201);
      return (await held()).requests === before;
    }, 10_000);
  });

  it('lets a held write go at once when the delivery thread dies', async function () {
    this.timeout(30_000);
    const { service, ws } = await behindSlowReceiver({ WEBHOOK_BACKPRESSURE_MAX_HOLD_MS: '60000' });
    const thread = service.service.dispatcherThread!;
    thread.busy(60_000);
    // Writes until one is still unanswered after half a second: held, for up to a minute.
    const write = await eventually('a write held', async () => {
      const sent = ws.api('POST', '/api/v1/tickets', ticket);
      const first = await Promise.race([sent.then(() => 'answered'), settle(500).then(() => 'waiting')]);
      return first === 'waiting' ? { sent } : undefined;
    });
    await thread.kill();
    expect((await write.sent).status).to.equal(201);
    expect((await held()).requests).to.equal(1);
    await thread.running();
  });

  it('drops a held write whose client gave up at once, while writes are still held: nothing written, no server error', async function () {
    this.timeout(30_000);
    const { service, ws } = await behindSlowReceiver({ WEBHOOK_BACKPRESSURE_MAX_HOLD_MS: '60000' });
    const thread = service.service.dispatcherThread!;
    thread.busy(60_000);
    const logged: string[] = [];
    const consoleError = console.error;
    console.error = (...args: unknown[]) => void logged.push(args.map(String).join(' '));
    let givenUp: string;
    // The held writes counted when the given-up one is still held (read just before its client leaves).
    let before = { requests: 0, seconds: 0 };
    try {
      // Whole requests, each closed by its client when not answered within half a second (held).
      givenUp = await eventually('a write held, then given up', async () => {
        const subject = `Given up ${Math.random()}`;
        const body = JSON.stringify({ ...ticket, subject });
        const request = http.request(`${service.url}/api/v1/tickets`, {
          method: 'POST',
          agent: false,
          headers: { authorization: `Bearer ${ws.apiKey}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        });
        request.on('error', () => undefined);
        const answered = new Promise<string>((resolve) => request.on('response', (response) => (response.resume(), resolve('answered'))));
        request.end(body);
        if ((await Promise.race([answered, settle(500).then(() => 'waiting')])) === 'answered') return undefined;
        before = await held();
        request.destroy();
        return subject;
      });
      // Out of the queue when its client left, though the thread still presses (for a minute): counted
      // as held then, for the half second it waited (before the fix it stayed queued until the press
      // first let up, 2 s later in one run).
      await eventually('the given-up write out of the queue', async () => (await held()).requests > before.requests, 1_000);
      expect((await held()).seconds - before.seconds).to.be.below(1);
      // The hold ends at once; a given-up write still queued would go on now.
      await thread.kill();
      await thread.running();
      await settle(300);
    } finally {
      console.error = consoleError;
    }
    const listed = (await ws.api('GET', '/api/v1/tickets?page_size=100')).body as { items: { subject: string | null }[] };
    expect(listed.items.map((t) => t.subject)).not.to.include(givenUp);
    expect(logged.filter((line) => line.includes('failed:'))).to.deep.equal([]);
  });
});
