// The service starts again after webhook subscriptions (and with them their delivery history) were
// deleted, whether the deletion was the last write, in the middle of a busy log, or followed by
// kill -9; a long history goes a batch at a time while the API writes, and one a kill -9 stopped part
// way goes at the next start, which delivers meanwhile, as it does while the index forgets a
// subscription it finds gone; and a start over a log whose
// deleted tail is large completes within a bound. Deletions leave positions that are never read
// again: nothing may wait for them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { subscriptionStream } from '../../src/domain/subscription/subscription.js';
import { DELIVERY_HISTORY_FILE } from '../../projections/deliveries-index-sqlite.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { historyDeletionStream } from '../../src/webhooks/dispatch/subscription-history.js';
import { deliverySteps } from '../support/delivery-steps.js';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { openTicket, ticketId } from '../support/tickets-fixtures.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { ADMIN_TOKEN, call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { emit, eventually, subscribe } from '../support/webhooks-dispatch.js';

/** A start that hangs is the defect; this bound only turns a hang into a failure with a message. */
const START_BOUND_MS = 30_000;

const timed = async <T>(what: string, start: () => Promise<T>): Promise<T> => {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} did not complete within ${START_BOUND_MS} ms`)), START_BOUND_MS)));
  try {
    return await Promise.race([start(), bound]);
  } finally {
    clearTimeout(timer);
  }
};

describe('restart after webhook subscriptions were deleted (e2e)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let receiver: Receiver;
  let ts: TestService | null = null;

  const start = () => timed('start-up', () => startTestService({ RATE_LIMIT_PER_KEY: '1000000' }, { dataDir }));

  beforeEach(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-deleted-tail-'));
    receiver = await startReceiver();
  });

  afterEach(async () => {
    await ts?.close();
    ts = null;
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const reopen = async (ws: TestWorkspace): Promise<TestWorkspace> => {
    await ts?.close();
    ts = await start();
    const url = ts.url;
    return { ...ws, api: (method, p, body, headers) => call(`${url}${p}`, method, ws.apiKey, body, headers) };
  };

  it('starts again when the deletion of a subscription and its delivery history was the last write', async () => {
    ts = await start();
    let ws = await ts.createWorkspace();
    const hook = await subscribe(ws, receiver.url);
    await emit(ts, ws.workspaceId);
    await receiver.waitForRequests(1);
    expect((await ws.api('DELETE', `/api/v1/webhooks/${hook.id}`)).status).to.equal(204);
    // The delivery history goes after the subscription's marker: wait until it is gone from the log.
    const log = ts.service.core.log;
    await eventually('the delivery history deleted', async () => (await log.readAll({ after: 0 })).every((e) => !e.stream.includes(hook.id)));

    ws = await reopen(ws);
    expect((await ws.api('GET', '/api/v1/webhooks')).body.items).to.deep.equal([]);
    expect((await ws.api('GET', `/api/v1/tickets/${await ticketId(ws)}`)).status).to.equal(200);
  });

  it('starts again after subscriptions were created and deleted in the middle of a busy log, with nothing lost', async () => {
    ts = await start();
    let ws = await ts.createWorkspace('business');
    const kept = await subscribe(ws, receiver.url, ['ticket.created']);
    let created = 0;
    let writing = true;
    const writers = Array.from({ length: 6 }, async () => {
      while (writing) {
        const reply = await openTicket(ws);
        expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
        created += 1;
      }
    });
    for (let i = 0; i < 8; i++) {
      // Each doomed subscription has a delivery history by the time it is deleted.
      const doomed = await subscribe(ws, `${receiver.url}/doomed-${i}`);
      await eventually('a delivery to the doomed subscription', () => receiver.requests.some((r) => r.path === `/hook/doomed-${i}`));
      expect((await ws.api('DELETE', `/api/v1/webhooks/${doomed.id}`)).status).to.equal(204);
    }
    writing = false;
    await Promise.all(writers);

    ws = await reopen(ws);
    const listed = await ws.api('GET', '/api/v1/tickets?page_size=1');
    expect(listed.body.total).to.equal(created);
    let announced = 0;
    for (let offset = 0; ; ) {
      const page = await ws.api('GET', `/api/v1/updates?types=ticket.created&limit=1000&timeout=0&offset=${offset}`);
      if (page.body.items.length === 0) break;
      announced += page.body.items.length;
      offset = page.body.next_offset;
    }
    expect(announced).to.equal(created);
    expect((await ws.api('GET', '/api/v1/webhooks')).body.items.map((h: { id: string }) => h.id)).to.deep.equal([kept.id]);
    const after = await ticketId(ws);
    await eventually('the kept subscription delivers after the restart', () => receiver.requests.some((r) => r.body.toString('utf8').includes(after)));
  });

  it('deletes a delivery history many transactions long while the API goes on writing, and starts again after', async () => {
    ts = await start();
    let ws = await ts.createWorkspace('business');
    const hook = await subscribe(ws, receiver.url);
    // 30,000 deliveries recorded as a dispatcher records them (one packed record each): 120 of the
    // log's deletion batches, a 5 ms pause after each, so a third of a second at least, even with
    // both threads deleting.
    const steps = deliverySteps(ts.service.core.clock());
    const log = ts.service.core.log;
    for (let n = 0; n < 30_000; n += 500) {
      const records = Array.from({ length: 500 }, (_, i) => {
        const id = `dlv_${n + i}`;
        return { id: randomBytes(16).toString('hex'), workspaceId: ws.workspaceId, ...packSteps([...steps.schedule(hook.id, id), ...steps.attempt(id, 'delivered')]) };
      });
      await log.append(deliveryStream(hook.id), records, 'any');
    }
    expect((await ws.api('DELETE', `/api/v1/webhooks/${hook.id}`)).status).to.equal(204);
    let writes = 0;
    let partWay = false;
    for (;;) {
      const left = (await log.readStream(deliveryStream(hook.id))).length;
      if (left === 0) break;
      if (left < 30_000) partWay = true;
      const reply = await openTicket(ws);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
      writes += 1;
    }
    expect(partWay, 'the deletion was seen under way').to.equal(true);
    expect(writes, 'tickets opened while the history went').to.be.greaterThan(0);

    ws = await reopen(ws);
    expect((await ws.api('GET', '/api/v1/webhooks')).body.items).to.deep.equal([]);
    expect((await ws.api('GET', '/api/v1/tickets?page_size=1')).body.total).to.equal(writes);
  });

  it('starts within a bound over a log whose deleted tail holds 20,000 events', async () => {
    ts = await start();
    let ws = await ts.createWorkspace();
    const ticket = await ticketId(ws);
    await ts.close();
    ts = null;
    // A long delivery history at the end of the log, then deleted (as a subscription's deletion does).
    const log = openSqliteLog({ file: path.join(dataDir, 'events.sqlite') });
    const stream = `deliveries-${randomBytes(16).toString('hex')}`;
    for (let batch = 0; batch < 20; batch++) {
      const events = Array.from({ length: 1000 }, (_, i) => ({ id: randomBytes(16).toString('hex'), type: 'delivery.attempted', workspaceId: ws.workspaceId, data: { n: batch * 1000 + i } }));
      await log.append(stream, events, 'any');
    }
    await log.deleteStream(stream);
    await log.close();

    ws = await reopen(ws);
    expect((await ws.api('GET', `/api/v1/tickets/${ticket}`)).status).to.equal(200);
    await ticketId(ws);
  });
});

describe('restart after kill -9 right after a webhook deletion (e2e, processes)', function () {
  this.timeout(120_000);
  let dataDir: string;
  let group: ProcessGroup;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-deleted-kill-'));
    group = createProcessGroup({ DATA_DIR: dataDir, ADMIN_TOKEN });
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
    await group.stopAll();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('comes up ready, and stops on SIGTERM, after being killed right after a DELETE', async () => {
    const first = await group.start('first', {});
    const workspace = await call(`${first.url}/admin/v1/workspaces`, 'POST', ADMIN_TOKEN, { name: 'w' });
    const key = String(workspace.body.api_key);
    const hook = await call(`${first.url}/api/v1/webhooks`, 'POST', key, { url: 'http://127.0.0.1:9/hook' });
    expect((await call(`${first.url}/api/v1/webhooks/${hook.body.id}`, 'DELETE', key)).status).to.equal(204);
    first.kill('SIGKILL');
    await first.exited;

    const second = await timed('start-up after kill -9', () => group.start('second', {}));
    expect((await call(`${second.url}/api/v1/webhooks`, 'GET', key)).body.items).to.deep.equal([]);
    second.kill('SIGTERM');
    await timed('shutdown on SIGTERM', () => second.exited);
    expect(second.child.exitCode).to.equal(0);
  });

  /** The receivers of the cases below are on 127.0.0.1. */
  const HOOKS_ENV = { WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' };

  /**
   * A first process makes a workspace with two subscriptions on `receiver`, `doomed` (/hook/doomed,
   * contact.created) and one kept (/hook/kept, ticket.created), then stops: a case then writes to its
   * log while no process runs.
   */
  const twoSubscriptions = async (receiver: Receiver): Promise<{ key: string; workspaceId: string; doomed: string }> => {
    const first = await group.start('first', HOOKS_ENV);
    const workspace = await call(`${first.url}/admin/v1/workspaces`, 'POST', ADMIN_TOKEN, { name: 'w' });
    const key = String(workspace.body.api_key);
    const doomed = String((await call(`${first.url}/api/v1/webhooks`, 'POST', key, { url: `${receiver.url}/doomed`, events: ['contact.created'] })).body.id);
    await call(`${first.url}/api/v1/webhooks`, 'POST', key, { url: `${receiver.url}/kept`, events: ['ticket.created'] });
    first.kill('SIGTERM');
    await first.exited;
    return { key, workspaceId: String(workspace.body.id), doomed };
  };

  /** Opens a ticket through `url` and waits for its delivery to the kept subscription. */
  const keptReceivesNewTicket = async (url: string, key: string, receiver: Receiver): Promise<void> => {
    const opened = await call(`${url}/api/v1/tickets`, 'POST', key, { contact: { email: 'after@example.com' }, subject: 'after the restart' });
    expect(opened.status).to.equal(201);
    await eventually('a delivery to the kept subscription', () => receiver.requests.some((r) => r.path === '/hook/kept' && r.body.toString('utf8').includes(String(opened.body.id))), 30_000);
  };

  it('delivers after a restart while the history of a subscription it finds gone is still being dropped from the index', async () => {
    const receiver = await startReceiver();
    try {
      const { key, workspaceId, doomed: gone } = await twoSubscriptions(receiver);
      // 100,000 settled deliveries and one waiting, then the subscription's stream deleted with no
      // process looking (as a DELETE on another process, or one killed before it told its dispatcher):
      // the restart's take-over finds the waiting one's subscription gone, and drops its history from
      // the index, 100 of the index's transactions with 10 ms between.
      const log = openSqliteLog({ file: path.join(dataDir, 'events.sqlite') });
      const steps = deliverySteps(Date.now() * 1000);
      for (let n = 0; n < 100_000; n += 1_000) {
        const settled = Array.from({ length: 1_000 }, (_, i) => [...steps.schedule(gone, `dlv_${n + i}`, { fannedOutThrough: 1 }), ...steps.attempt(`dlv_${n + i}`, 'delivered')]).flat();
        await log.append(deliveryStream(gone), [{ id: randomBytes(16).toString('hex'), workspaceId: workspaceId, ...packSteps(settled) }], 'any');
      }
      const waiting = steps.schedule(gone, 'dlv_waiting', { fannedOutThrough: 1 });
      await log.append(deliveryStream(gone), [{ id: randomBytes(16).toString('hex'), workspaceId: workspaceId, ...packSteps(waiting) }], 'any');
      await log.deleteStream(subscriptionStream(gone));
      await log.close();
      // The index thread applies them as the second process starts: until then, nothing to count.
      const second = await timed('start-up', () => group.start('second', HOOKS_ENV));
      const index = new Database(path.join(dataDir, DELIVERY_HISTORY_FILE), { readonly: true });
      const indexed = (): number => index.prepare('SELECT count(*) FROM deliveries WHERE sub = ?').pluck().get(gone) as number;
      try {
        await keptReceivesNewTicket(second.url, key, receiver);
        expect(indexed(), "the gone subscription's deliveries still in the index as the new ticket was delivered").to.be.greaterThan(0);
        await eventually('the index forgot them', () => indexed() === 0, 60_000);
        expect(receiver.requests.filter((r) => r.path === '/hook/doomed'), 'nothing sent to the gone subscription').to.deep.equal([]);
      } finally {
        index.close();
      }
    } finally {
      await receiver.close();
    }
  });

  it('takes up the deletion of a long history that a kill -9 stopped part way, and delivers meanwhile', async () => {
    const receiver = await startReceiver();
    try {
      const { key, workspaceId, doomed } = await twoSubscriptions(receiver);
      // 60,000 deliveries in the doomed subscription's history, recorded as a dispatcher records them:
      // 240 of the log's deletion batches, a 5 ms pause after each. Settled, and behind the fan-out's
      // checkpoint, as almost all of a long history is: a restart's take-over does not read them.
      const file = path.join(dataDir, 'events.sqlite');
      const log = openSqliteLog({ file });
      const steps = deliverySteps(Date.now() * 1000);
      for (let n = 0; n < 60_000; n += 1_000) {
        const records = Array.from({ length: 1_000 }, (_, i) => ({
          id: randomBytes(16).toString('hex'),
          workspaceId: workspaceId,
          ...packSteps([...steps.schedule(doomed, `dlv_${n + i}`, { fannedOutThrough: 1 }), ...steps.attempt(`dlv_${n + i}`, 'delivered')]),
        }));
        await log.append(deliveryStream(doomed), records, 'any');
      }
      await log.close();
      const reader = new Database(file, { readonly: true });
      const left = (stream: string): number => reader.prepare('SELECT count(*) FROM events WHERE stream = ?').pluck().get(stream) as number;
      try {
        const second = await group.start('second', HOOKS_ENV);
        expect((await call(`${second.url}/api/v1/webhooks/${doomed}`, 'DELETE', key)).status).to.equal(204);
        await eventually('the deletion under way', () => left(deliveryStream(doomed)) < 60_000, 30_000);
        second.kill('SIGKILL');
        await second.exited;
        const stoppedAt = left(deliveryStream(doomed));
        expect(stoppedAt, 'the history left by the kill').to.be.greaterThan(0);
        expect(left(historyDeletionStream(doomed)), 'the note that its deletion began').to.be.greaterThan(0);

        const third = await timed('start-up after kill -9', () => group.start('third', HOOKS_ENV));
        await keptReceivesNewTicket(third.url, key, receiver);
        await eventually('the history deleted', () => left(deliveryStream(doomed)) === 0, 60_000);
        await eventually('the note gone', () => left(historyDeletionStream(doomed)) === 0, 10_000);
      } finally {
        reader.close();
      }
    } finally {
      await receiver.close();
    }
  });
});
