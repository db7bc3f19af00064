// Tenant isolation matrix: workspace A holds one of every kind of record; workspace B's key sends
// every public route that takes an id with each of A's ids (in the path, and in bodies that refer to
// records) and gets the contract's 404 (or the 422 for a foreign media id), and A's records and log
// are untouched. B's /updates, export and webhooks never carry anything of A's.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { replayStream } from '../../src/domain/replay/replay.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { ticketId, uniqueEmail } from '../support/tickets-fixtures.js';

const run = promisify(execFile);

/** The kind of record each path parameter names, by the segment before it. */
const KIND_BEFORE: Readonly<Record<string, string>> = {
  tickets: 'ticket',
  contacts: 'contact',
  media: 'media',
  articles: 'article',
  webhooks: 'webhook',
  deliveries: 'delivery',
  replays: 'replay',
};

/** A body that would succeed on the caller's own record, so only ownership can refuse it. */
const BODIES: Readonly<Record<string, unknown>> = {
  'PATCH /api/v1/tickets/:id': { subject: 'taken over' },
  'POST /api/v1/tickets/:id/rate': { rating: 1 },
  'POST /api/v1/tickets/:id/messages': { content: 'intruder' },
  'PATCH /api/v1/articles/:article_id': { title: 'taken over' },
  'PATCH /api/v1/webhooks/:webhook_id': { description: 'taken over' },
  'POST /api/v1/webhooks/:webhook_id/replay': { since: 0 },
};

describe('tenant isolation matrix (e2e)', function () {
  this.timeout(60_000);
  let ts: TestService;
  let a: TestWorkspace;
  let b: TestWorkspace;
  let receiverA: Receiver;
  let receiverB: Receiver;
  const ids: Record<string, string> = {};

  before(async () => {
    ts = await startTestService({ WEBHOOK_RETRY_DELAYS: '1h,1h,1h,1h,1h' });
    [a, b] = [await ts.createWorkspace('team'), await ts.createWorkspace('team')];
    [receiverA, receiverB] = [await startReceiver(), await startReceiver()];
    await b.api('POST', '/api/v1/webhooks', { url: receiverB.url });
    const hook = await a.api('POST', '/api/v1/webhooks', { url: receiverA.url });
    ids['webhook'] = String(hook.body.id);
    ids['ticket'] = await ticketId(a, { contact: { email: uniqueEmail() }, subject: 'A only', message: 'secret of A' });
    ids['contact'] = String((await a.api('GET', `/api/v1/tickets/${ids['ticket']}`)).body.contact_id);
    const form = new FormData();
    form.append('file', new Blob(['A file'], { type: 'text/plain' }), 'a.txt');
    const upload = await fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${a.apiKey}` }, body: form });
    ids['media'] = String(((await upload.json()) as { id: string }).id);
    ids['article'] = String((await a.api('POST', '/api/v1/articles', { title: 'A article', body: 'A knowledge' })).body.id);
    // The history records a delivery once its attempt's outcome is written, a moment after it arrives.
    ids['delivery'] = await eventually('a delivery in A\'s history', async () => {
      const history = await a.api('GET', `/api/v1/webhooks/${ids['webhook']}/deliveries`);
      const id: unknown = history.body.items[0]?.id;
      return typeof id === 'string' ? id : undefined;
    });
    const replay = await a.api('POST', `/api/v1/webhooks/${ids['webhook']}/replay`, { since: 0 });
    expect(replay.status, JSON.stringify(replay.body)).to.equal(202);
    ids['replay'] = String(replay.body.id);
    expect(Object.values(ids).every((id) => /^[0-9a-f]{32}$/.test(id)), JSON.stringify(ids)).to.equal(true);
  });
  after(async () => {
    await receiverA.close();
    await receiverB.close();
    await ts.close();
  });

  const snapshotOfA = async () => {
    const events = await ts.service.core.log.readAll({ after: 0, workspaceId: a.workspaceId });
    const reads = await Promise.all([
      a.api('GET', `/api/v1/tickets/${ids['ticket']}`),
      a.api('GET', `/api/v1/tickets/${ids['ticket']}/messages`),
      a.api('GET', `/api/v1/contacts/${ids['contact']}`),
      a.api('GET', `/api/v1/articles/${ids['article']}`),
      a.api('GET', '/api/v1/webhooks'),
    ]);
    // A's delivery records, and its replay's progress, go on being written as its own deliveries
    // conclude: they are not B's doing.
    const owned = events.filter((e) => e.stream !== deliveryStream(ids['webhook'] as string) && e.stream !== replayStream(ids['replay'] as string));
    return { events: owned.map((e) => e.id), reads: reads.map((r) => r.body) };
  };

  it('answers every route with another workspace\'s id as not found, and changes nothing of it', async () => {
    const before = await snapshotOfA();
    const tried: string[] = [];
    for (const route of ts.service.routes.filter((r) => r.path.startsWith('/api/v1/') && r.path.includes(':'))) {
      const segments = route.path.split('/');
      const concrete = segments.map((s, i) => (s.startsWith(':') ? ids[KIND_BEFORE[segments[i - 1] ?? ''] ?? ''] ?? s : s)).join('/');
      for (const method of route.methods.filter((m) => m !== 'HEAD')) {
        const body = BODIES[`${method} ${route.path}`];
        const reply = await b.api(method, concrete, body);
        tried.push(`${method} ${route.path}`);
        expect(reply.status, `${method} ${concrete}: ${JSON.stringify(reply.body)}`).to.equal(404);
      }
    }
    expect(tried.length).to.be.at.least(17);
    // Ids of A's records inside B's bodies.
    const inbound = await b.api('POST', '/api/v1/messages', { content: 'intruder', ticket_id: ids['ticket'] });
    expect(inbound.status, JSON.stringify(inbound.body)).to.equal(404);
    const own = await ticketId(b);
    const withMedia = await b.api('POST', `/api/v1/tickets/${own}/messages`, { content: 'look', media_ids: [ids['media']] });
    expect(withMedia.status).to.equal(422);
    expect(withMedia.body.error_code).to.equal('VALIDATION_ERROR');
    expect(await snapshotOfA()).to.deep.equal(before);
  });

  it('never carries A\'s events or ids in B\'s /updates, export or webhooks', async () => {
    await b.api('POST', '/api/v1/tickets', { contact: { email: uniqueEmail() }, message: 'B writes too' });
    await eventually('B\'s delivery', () => receiverB.requests.length > 0);
    const feed = await b.api('GET', '/api/v1/updates?offset=0&limit=1000&timeout=0');
    const exported = await run(process.execPath, ['--import', 'tsx', 'scripts/export.ts', '--url', ts.url, '--key', b.apiKey]);
    const texts = [JSON.stringify(feed.body), exported.stdout, ...receiverB.requests.map((r) => r.body.toString('utf8'))];
    expect(feed.body.items.length).to.be.greaterThan(0);
    for (const text of texts) {
      for (const value of [a.workspaceId, ...Object.values(ids), 'secret of A', 'A knowledge']) expect(text).to.not.contain(value);
    }
    for (const item of feed.body.items as { workspace_id: string }[]) expect(item.workspace_id).to.equal(b.workspaceId);
  });
});
