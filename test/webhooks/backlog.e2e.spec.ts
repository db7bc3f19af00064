// How far delivery is behind, for operators: GET /admin/v1/webhooks/backlog and the metrics' gauges
// show the attempts waiting and how late the earliest one is, while a slow receiver holds the only
// in-flight slot, and nothing once it has caught up; 503 while the delivery thread is down. And how
// punctual it has been, measured in the delivery thread: how long after its commit each event was
// fanned out, and how long after it fell due each attempt went out, first attempts and retries apart.
// A receiver's slowness is not the engine's lateness, but attempts queued behind it are.
import { expect } from 'chai';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { startReceiver } from '../support/receiver.js';
import { ADMIN_TOKEN, startTestService } from '../support/server.js';
import { FAST_RETRIES, closedAfterEach, emit, metricLines, eventIdOf, eventually, subscribe } from '../support/webhooks-dispatch.js';

interface Backlog {
  readonly waiting: number;
  readonly oldest_due_seconds: number;
}

describe('webhook delivery backlog and punctuality (e2e)', () => {
  const started = closedAfterEach();

  const backlog = async (): Promise<Backlog> => {
    const reply = await started.test!.admin('GET', '/admin/v1/webhooks/backlog');
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body as Backlog;
  };
  const metrics = (matching: RegExp): Promise<string[]> => metricLines(started.test!, matching);
  const gauges = async (): Promise<string> => (await metrics(/^webhook_deliveries_/)).join('\n');
  const readyz = async (authorization?: string): Promise<{ status: number; body: unknown }> => {
    const reply = await fetch(`${started.test!.url}/readyz`, authorization === undefined ? {} : { headers: { authorization } });
    return { status: reply.status, body: await reply.json() };
  };

  /** A subscription whose receiver takes 800 ms per attempt, one at a time: the others wait, and the earliest waits longest. */
  const behindSlowReceiver = async () => {
    const slow = (started.receiver = await startReceiver());
    slow.respond({ kind: 'delay', ms: 800, status: 200 });
    const service = (started.test = await startTestService({ ...FAST_RETRIES, WEBHOOK_MAX_IN_FLIGHT: '1' }));
    const ws = await service.createWorkspace();
    await subscribe(ws, slow.url);
    return { ws, service, slow };
  };

  it('shows the attempts waiting behind a slow receiver and how late the earliest is, then nothing once they are sent', async () => {
    const { ws, service, slow } = await behindSlowReceiver();
    expect(await backlog()).to.deep.equal({ waiting: 0, oldest_due_seconds: 0 });

    const events: RecordedEvent[] = [];
    for (let i = 0; i < 4; i++) events.push(await emit(service, ws.workspaceId));
    const behind = await eventually('the backlog late by half a second', async () => {
      const now = await backlog();
      return now.waiting >= 2 && now.oldest_due_seconds >= 0.5 ? now : undefined;
    });
    expect(behind.waiting).to.be.at.most(3);
    // /readyz tells it too, to the admin token only, and stays ready: a backlog is no reason to leave the rotation.
    const ready = await readyz(`Bearer ${ADMIN_TOKEN}`);
    expect(ready.status).to.equal(200);
    expect((ready.body as { webhooks: Backlog }).webhooks.waiting).to.be.within(1, 3);
    expect((ready.body as { webhooks: Backlog }).webhooks.oldest_due_seconds).to.be.greaterThan(0);
    const metrics = await gauges();
    expect(metrics).to.match(/^webhook_deliveries_waiting [1-3]$/m);
    expect(Number(/^webhook_deliveries_late_seconds (\S+)$/m.exec(metrics)?.[1])).to.be.greaterThan(0.4);

    slow.respond({ kind: 'status', status: 200 });
    await eventually('every event delivered', () => {
      const received = new Set(slow.requests.map(eventIdOf));
      return events.every((e) => received.has(e.id));
    }, 15_000);
    expect(await backlog()).to.deep.equal({ waiting: 0, oldest_due_seconds: 0 });
    expect(await gauges()).to.match(/^webhook_deliveries_waiting 0$/m).and.match(/^webhook_deliveries_late_seconds 0$/m);
  });

  it('answers 503 with Retry-After while the delivery thread is down', async () => {
    const test = (started.test = await startTestService(FAST_RETRIES));
    const thread = test.service.dispatcherThread!;
    await thread.kill();
    const reply = await test.admin('GET', '/admin/v1/webhooks/backlog');
    expect(reply.status).to.equal(503);
    expect(reply.headers.get('retry-after')).to.equal('1');
    await thread.running();
    expect((await backlog()).waiting).to.equal(0);
  });

  it('is for the admin token only: /readyz answers anyone else the bare status', async () => {
    const test = (started.test = await startTestService());
    const ws = await test.createWorkspace();
    expect((await ws.api('GET', '/admin/v1/webhooks/backlog')).status).to.equal(401);
    for (const authorization of [undefined, `Bearer ${ws.apiKey}`, `Bearer ${ADMIN_TOKEN}x`, ADMIN_TOKEN]) {
      const ready = await readyz(authorization);
      expect(ready, String(authorization)).to.deep.equal({ status: 200, body: { status: 'ready' } });
    }
    expect(await readyz(`bearer ${ADMIN_TOKEN}`)).to.deep.equal({ status: 200, body: { status: 'ready', webhooks: { waiting: 0, oldest_due_seconds: 0 } } });
  });

  /** The punctuality series, `name{labels}` → value. */
  const punctuality = async (): Promise<Map<string, number>> => {
    const lines = await metrics(/^webhook_(fanout|attempt_start)_delay_seconds/);
    return new Map(lines.map((line) => [line.slice(0, line.lastIndexOf(' ')), Number(line.slice(line.lastIndexOf(' ') + 1))]));
  };
  const first = (suffix: string) => `webhook_attempt_start_delay_seconds_${suffix}`;

  it('counts each fan-out and each attempt by kind, a retry apart from first attempts', async () => {
    const receiver = (started.receiver = await startReceiver());
    // The first attempt fails: one retry, 20 ms later.
    receiver.respondOnce({ kind: 'status', status: 500 });
    const test = (started.test = await startTestService(FAST_RETRIES));
    const ws = await test.createWorkspace();
    await subscribe(ws, receiver.url);
    const events = [await emit(test, ws.workspaceId), await emit(test, ws.workspaceId)];
    await eventually('both events delivered, one after a retry', () => receiver.requests.length >= 3 && events.every((e) => receiver.requests.some((r) => eventIdOf(r) === e.id)));
    const figures = await eventually('the attempts counted', async () => {
      const now = await punctuality();
      return now.get(first('count{attempt="first"}')) === 2 && now.get(first('count{attempt="retry"}')) === 1 ? now : undefined;
    });
    expect(figures.get('webhook_fanout_delay_seconds_count')).to.equal(2);
    expect(figures.get(first('bucket{le="+Inf",attempt="retry"}'))).to.equal(1);
    expect(figures.get(first('sum{attempt="first"}'))).to.be.at.least(0);
    expect([...figures.keys()].some((k) => k.includes('attempt="replay"'))).to.equal(false);
  });

  it('shows first attempts queued behind a slow receiver as late, and answers without the figures while the thread is down', async () => {
    const { ws, service } = await behindSlowReceiver();
    for (let i = 0; i < 3; i++) await emit(service, ws.workspaceId);
    const figures = await eventually('three first attempts counted', async () => {
      const now = await punctuality();
      return now.get(first('count{attempt="first"}')) === 3 ? now : undefined;
    }, 15_000);
    // One slot: the second cannot start before the first is answered (800 ms), the third before the second.
    expect(figures.get(first('bucket{le="0.5",attempt="first"}'))).to.be.at.most(1);
    expect(figures.get(first('bucket{le="1",attempt="first"}'))).to.be.at.most(2);
    expect(figures.get(first('sum{attempt="first"}'))).to.be.at.least(2.4);

    const thread = service.service.dispatcherThread!;
    await thread.kill();
    expect((await punctuality()).size).to.equal(0);
    await thread.running();
    // A new thread counts from nothing, as a restarted process does (Prometheus reads it as a reset).
    expect((await punctuality()).get('webhook_fanout_delay_seconds_count')).to.equal(0);
  });
});
