// The deliveries route end to end on the embedded service: pages by cursor from the delivery-history
// index the dispatcher thread keeps, its filters, cursors that are not this listing's, retention
// pruning that leaves the log alone, and a restart that resumes the index from its checkpoint.
import { rmSync } from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { DELIVERY_HISTORY_FILE } from '../../projections/deliveries-index-sqlite.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { operatorStatus, ticketUpdated } from '../support/updates-events.js';
import { FAST_RETRIES, emit, eventually, subscribe } from '../support/webhooks-dispatch.js';

interface Item {
  readonly id: string;
  readonly status: string;
  readonly event_type: string;
  readonly created_at: string;
}

describe('webhook delivery history (e2e)', () => {
  let receiver: Receiver;
  let test: TestService;
  let ws: TestWorkspace;

  beforeEach(async () => {
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await test?.close();
    await receiver.close();
  });

  const start = async (env: Record<string, string> = FAST_RETRIES, dataDir?: string) => {
    test = await startTestService(env, dataDir === undefined ? {} : { dataDir });
  };

  const list = async (subscriptionId: string, query = ''): Promise<{ items: Item[]; page_size: number; next_cursor: string | null }> => {
    const reply = await ws.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries${query}`);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body;
  };

  /** Every item of a listing, page after page. */
  const everything = async (subscriptionId: string, query: string): Promise<{ ids: string[]; pages: number }> => {
    const ids: string[] = [];
    let pages = 0;
    for (let cursor: string | null = null; ; ) {
      const page = await list(subscriptionId, `?${query}${cursor === null ? '' : `&cursor=${cursor}`}`);
      pages += 1;
      ids.push(...page.items.map((d) => d.id));
      if (page.next_cursor === null) return { ids, pages };
      cursor = page.next_cursor;
    }
  };

  const settledCount = async (subscriptionId: string, count: number) =>
    eventually(`${count} settled deliveries`, async () => {
      const { items } = await list(subscriptionId, '?page_size=100');
      return items.length === count && items.every((d) => d.status !== 'waiting') && items;
    });

  it('pages through a history by cursor, newest first, each delivery once, filtered by status, event type and time', async () => {
    await start();
    ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    for (let i = 0; i < 7; i++) await emit(test, ws.workspaceId, ticketUpdated(`t${i}`));
    await settledCount(sub.id, 7);
    receiver.respond({ kind: 'status', status: 500 });
    for (let i = 0; i < 5; i++) await emit(test, ws.workspaceId, operatorStatus(`u${i}`));
    const all = await settledCount(sub.id, 12);

    const { ids, pages } = await everything(sub.id, 'page_size=5');
    expect(pages).to.equal(3);
    expect(ids).to.deep.equal(all.map((d) => d.id));
    expect(new Set(ids).size).to.equal(12);
    expect([...all].sort((a, b) => (a.created_at < b.created_at ? 1 : -1)).map((d) => d.created_at)).to.deep.equal(all.map((d) => d.created_at));

    const failed = await everything(sub.id, 'status=failed&page_size=2');
    expect(failed.ids).to.deep.equal(all.filter((d) => d.status === 'failed').map((d) => d.id));
    expect(failed.ids).to.have.length(5);
    const updates = await everything(sub.id, 'event_type=ticket.updated&status=delivered&page_size=3');
    expect(updates.ids).to.deep.equal(all.filter((d) => d.event_type === 'ticket.updated').map((d) => d.id));
    expect(updates.ids).to.have.length(7);
    expect((await list(sub.id, '?event_type=ticket.updated&status=failed')).items).to.deep.equal([]);

    const middle = all[6] as Item;
    const before = await everything(sub.id, `created_before=${encodeURIComponent(middle.created_at)}&page_size=4`);
    expect(before.ids).to.deep.equal(all.filter((d) => d.created_at < middle.created_at).map((d) => d.id));
    const from = await everything(sub.id, `created_from=${encodeURIComponent(middle.created_at)}&page_size=4`);
    expect(from.ids).to.deep.equal(all.filter((d) => d.created_at >= middle.created_at).map((d) => d.id));
  });

  it("refuses a cursor that is not this listing's (422), and answers 404 for a deleted or another workspace's webhook", async () => {
    await start();
    ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    const other = await subscribe(ws, `${receiver.url}/other`);
    for (let i = 0; i < 3; i++) await emit(test, ws.workspaceId);
    await settledCount(sub.id, 3);
    await settledCount(other.id, 3);
    const otherCursor = (await list(other.id, '?page_size=1')).next_cursor;
    expect(otherCursor).to.be.a('string');

    const foreign = await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?cursor=${otherCursor}`);
    expect(foreign.status).to.equal(422);
    expect(foreign.body.detail[0].loc).to.deep.equal(['query', 'cursor']);
    for (const bad of ['garbage', Buffer.from('[1,2,3]').toString('base64url'), 'x'.repeat(201)]) {
      const reply = await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?cursor=${bad}`);
      expect(reply.status, bad).to.equal(422);
      expect(reply.body.detail[0].loc).to.deep.equal(['query', 'cursor']);
    }
    // The offset paging of earlier releases is refused by name rather than silently ignored.
    expect((await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?page=2`)).body.detail[0]).to.include({ type: 'extra_forbidden' });
    expect((await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?created_before=yesterday`)).status).to.equal(422);

    const stranger = await test.createWorkspace();
    expect((await stranger.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?cursor=${otherCursor}`)).status).to.equal(404);
    expect((await ws.api('DELETE', `/api/v1/webhooks/${other.id}`)).status).to.equal(204);
    const gone = await ws.api('GET', `/api/v1/webhooks/${other.id}/deliveries?cursor=${otherCursor}`);
    expect(gone.status).to.equal(404);
    expect(gone.body).to.deep.equal({ detail: 'Webhook not found' });
  });

  it('prunes settled history past WEBHOOK_HISTORY_RETENTION from the index, keeps waiting deliveries, and leaves the log alone', async () => {
    // Failures retried only after a minute: they stay waiting through the test.
    await start({ WEBHOOK_HISTORY_RETENTION: '1s', WEBHOOK_RETRY_DELAYS: '1m,1m,1m,1m,1m' });
    ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    for (let i = 0; i < 3; i++) await emit(test, ws.workspaceId);
    const delivered = await eventually('3 deliveries listed', async () => {
      const { items } = await list(sub.id);
      return items.length === 3 && items.every((d) => d.status === 'delivered') && items;
    });
    receiver.respond({ kind: 'status', status: 500 });
    await emit(test, ws.workspaceId);
    const waiting = await eventually('a waiting delivery', async () => (await list(sub.id, '?status=waiting')).items[0]);

    await eventually('the delivered ones pruned', async () => (await list(sub.id)).items.length === 1, 5_000);
    expect((await list(sub.id)).items.map((d) => d.id)).to.deep.equal([waiting.id]);
    // Past the retention a delivery is not retried either.
    expect((await ws.api('POST', `/api/v1/webhooks/${sub.id}/deliveries/${delivered[0]?.id}/retry`)).status).to.equal(404);
    const records = await test.service.core.log.readStream(deliveryStream(sub.id));
    expect(records.map((r) => JSON.stringify(r.data)).join()).to.include((delivered[0] as Item).id);
  });

  it('resumes the index from its checkpoint after a restart, and goes on indexing', async () => {
    await start();
    ws = await test.createWorkspace();
    const sub = await subscribe(ws, receiver.url);
    for (let i = 0; i < 4; i++) await emit(test, ws.workspaceId);
    const before = await settledCount(sub.id, 4);
    const { dataDir } = test;
    await test.service.close();

    // A row the index had applied is altered: resumed from its checkpoint, the index does not read
    // those records again (a rebuild from the log would set the row right again).
    const file = new Database(path.join(dataDir, DELIVERY_HISTORY_FILE));
    expect(file.prepare('SELECT position FROM meta').pluck().get()).to.be.greaterThan(0);
    const altered = (before[3] as Item).id;
    file.prepare("UPDATE deliveries SET status = 'cancelled', json = json_set(json, '$.status', 'cancelled') WHERE id = ?").run(altered);
    file.close();

    await start(FAST_RETRIES, dataDir);
    const url = test.url;
    ws = { ...ws, api: (method, p, body, headers) => call(`${url}${p}`, method, ws.apiKey, body, headers) };
    expect((await list(sub.id)).items.map((d) => d.id)).to.deep.equal(before.map((d) => d.id));
    expect((await list(sub.id, '?status=cancelled')).items.map((d) => d.id)).to.deep.equal([altered]);
    await emit(test, ws.workspaceId);
    const after = await settledCount(sub.id, 5);
    expect(after.slice(1).map((d) => d.id)).to.deep.equal(before.map((d) => d.id));
    expect(receiver.requests).to.have.length(5);
    rmSync(dataDir, { recursive: true, force: true });
  });
});
