// History replay to a subscription, embedded (the engine in its worker thread), with real receivers:
// the replayed deliveries keep the event id and the body bytes, carry their own delivery id and the
// normal signature; the range, `types` and `only_failed` choose what goes; the progress reaches the
// right counts; a dispatcher that dies mid-replay is continued without a second delivery id per event;
// a DELETE of the subscription stops it; live deliveries go on meanwhile.
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { startReceiver, type Receiver, type ReceivedRequest } from '../support/receiver.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { verdictOf } from '../support/standard-webhooks.js';
import { appendEvents, operatorStatus, ticketUpdated } from '../support/updates-events.js';
import { FAST_RETRIES, eventIdOf, eventually, header, settle, subscribe } from '../support/webhooks-dispatch.js';

const replayed = (requests: readonly ReceivedRequest[], live: ReadonlySet<string>): ReceivedRequest[] => requests.filter((r) => !live.has(header(r, 'webhook-id')));

describe('webhook history replay (e2e)', function () {
  this.timeout(60_000);
  let test: TestService;
  let receiver: Receiver;
  let ws: TestWorkspace;

  beforeEach(async () => {
    receiver = await startReceiver();
    test = await startTestService(FAST_RETRIES);
    ws = await test.createWorkspace('business');
  });

  afterEach(async () => {
    await test.close();
    await receiver.close();
  });

  /** Public events of the workspace, each in its own append (one offset each). */
  const emitMany = async (count: number, event = () => ticketUpdated(randomId())): Promise<RecordedEvent[]> => {
    const records: RecordedEvent[] = [];
    for (let i = 0; i < count; i++) records.push(...(await appendEvents(test.service.core.log, ws.workspaceId, [event()])));
    return records;
  };

  /** A subscription with `count` events delivered live, and the live deliveries' ids. */
  const withHistory = async (count: number): Promise<{ hook: { id: string; secret: string }; events: RecordedEvent[]; liveIds: Set<string> }> => {
    const hook = await subscribe(ws, receiver.url);
    const events = await emitMany(count);
    const live = await receiver.waitForRequests(count);
    return { hook, events, liveIds: new Set(live.map((r) => header(r, 'webhook-id'))) };
  };

  const replay = (hookId: string, body: unknown) => ws.api('POST', `/api/v1/webhooks/${hookId}/replay`, body);
  const progress = async (hookId: string, replayId: string) => (await ws.api('GET', `/api/v1/webhooks/${hookId}/replays/${replayId}`)).body;
  const settled = (hookId: string, replayId: string, deliveries: number) =>
    eventually(`replay ${replayId} settled`, async () => {
      const p = await progress(hookId, replayId);
      return p.status === 'completed' && p.delivered + p.failed === deliveries && p;
    }, 30_000);

  it('sends a range again: same event ids and body bytes, a delivery id of its own, the normal signature, and counts that add up', async () => {
    const hook = await subscribe(ws, receiver.url);
    const events = await emitMany(5);
    const live = await receiver.waitForRequests(5);
    const liveIds = new Set(live.map((r) => header(r, 'webhook-id')));
    const [, second, , fourth] = events as [RecordedEvent, RecordedEvent, RecordedEvent, RecordedEvent];

    const answer = await replay(hook.id, { since: second.offset, until: fourth.offset });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);
    expect(answer.body).to.include({ webhook_id: hook.id, since: second.offset, until: fourth.offset, only_failed: false });
    expect(answer.body.status).to.be.oneOf(['running', 'completed']);
    const done = await settled(hook.id, answer.body.id, 3);
    expect(done).to.include({ matched: 3, sent: 3, delivered: 3, failed: 0 });

    const again = replayed(await receiver.waitForRequests(8), liveIds);
    expect(again.map(eventIdOf)).to.have.members(events.slice(1, 4).map((e) => e.id));
    const hookLib = new Webhook(hook.secret);
    for (const request of again) {
      const original = live.find((r) => eventIdOf(r) === eventIdOf(request)) as ReceivedRequest;
      expect(request.body.equals(original.body), 'byte-identical body').to.equal(true);
      expect(header(request, 'webhook-id')).to.not.equal(deliveryIdOf(eventIdOf(request), hook.id));
      expect(header(request, 'x-webhook-id')).to.equal(header(request, 'webhook-id'));
      expect(verdictOf(hookLib, request).ok).to.equal(true);
    }
    // The delivery history shows them apart.
    const history = await ws.api('GET', `/api/v1/webhooks/${hook.id}/deliveries?page_size=100`);
    const byReplay = history.body.items.filter((d: { replay_id: string | null }) => d.replay_id === answer.body.id);
    expect(byReplay.map((d: { id: string }) => d.id)).to.have.members(again.map((r) => header(r, 'webhook-id')));
    expect(history.body.items.filter((d: { replay_id: string | null }) => d.replay_id === null)).to.have.length(5);
  });

  it('records one replay for the same request sent twice at once under one Idempotency-Key, and two without', async () => {
    const { hook, events, liveIds } = await withHistory(3);
    const headers = { 'Idempotency-Key': randomId() };
    const body = { since: (events[0] as RecordedEvent).offset };
    const keyed = () => ws.api('POST', `/api/v1/webhooks/${hook.id}/replay`, body, headers);
    // The one still running answers 409 with Retry-After; a retry then answers the first answer.
    const both = await Promise.all([keyed(), keyed()]);
    const first = both.find((r) => r.status === 202);
    expect(first, JSON.stringify(both.map((r) => r.status))).to.not.equal(undefined);
    for (const answer of both) expect(answer.status).to.be.oneOf([202, 409]);
    const retried = await keyed();
    expect(retried.status).to.equal(202);
    expect(retried.body.id).to.equal(first?.body.id);
    expect(retried.headers.get('idempotent-replayed')).to.equal('true');
    await settled(hook.id, retried.body.id, 3);
    const unkeyed = await Promise.all([replay(hook.id, body), replay(hook.id, body)]);
    expect(unkeyed[0].body.id).to.not.equal(unkeyed[1].body.id);
    for (const other of unkeyed) await settled(hook.id, other.body.id, 3);
    // Three replays in all: each event three times more, under three delivery ids.
    const again = replayed(await receiver.waitForRequests(12), liveIds);
    expect(again).to.have.length(9);
    expect(new Set(again.map((r) => header(r, 'webhook-id'))).size).to.equal(9);
  });

  it('refuses a bad request in the contract shapes, and answers 404 for an unknown replay or webhook', async () => {
    const hook = await subscribe(ws, receiver.url);
    const since = await replay(hook.id, { since: 20, until: 10 });
    expect(since.status).to.equal(422);
    expect(since.body.detail[0]).to.include({ type: 'value_error' });
    expect(since.body.detail[0].loc).to.deep.equal(['body', 'until']);
    const types = await replay(hook.id, { since: 0, types: ['ticket.updated', 'no.such.event'] });
    expect(types.status).to.equal(422);
    expect(types.body).to.include({ error_code: 'VALIDATION_ERROR' });
    expect(types.body.detail.unknown).to.deep.equal(['no.such.event']);
    const iso = await replay(hook.id, { since: '2026-13-45T99:00:00Z' });
    expect(iso.status).to.equal(422);
    expect(iso.body.detail[0].loc).to.deep.equal(['body', 'since']);
    expect((await replay(hook.id, {})).status).to.equal(422);
    expect((await replay(hook.id, { since: 0, extra: true })).status).to.equal(422);
    expect((await ws.api('GET', `/api/v1/webhooks/${hook.id}/replays/${randomId()}`)).status).to.equal(404);
    expect((await ws.api('GET', `/api/v1/webhooks/${hook.id}/replays/${randomId()}`)).body).to.have.property('detail');
    expect((await replay(randomId(), { since: 0 })).status).to.equal(404);
    // Another workspace's replay is not found through this one's key.
    const other = await test.createWorkspace('business');
    const started = await replay(hook.id, { since: 0 });
    expect((await other.api('GET', `/api/v1/webhooks/${hook.id}/replays/${started.body.id}`)).status).to.equal(404);
  });

  it('takes ISO instants and a `types` filter, and refuses an inactive webhook', async () => {
    const hook = await subscribe(ws, receiver.url);
    const from = new Date().toISOString();
    await emitMany(3);
    const statuses = await emitMany(2, () => operatorStatus(randomId()));
    await receiver.waitForRequests(5);
    const answer = await replay(hook.id, { since: from, until: new Date(Date.now() + 1_000).toISOString(), types: ['operator.status.changed'] });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);
    await settled(hook.id, answer.body.id, 2);
    const again = (await receiver.waitForRequests(7)).slice(5);
    expect(again.map(eventIdOf)).to.have.members(statuses.map((e) => e.id));

    expect((await ws.api('PATCH', `/api/v1/webhooks/${hook.id}`, { is_active: false })).status).to.equal(200);
    const inactive = await replay(hook.id, { since: 0 });
    expect(inactive.status).to.equal(409);
    expect(inactive.body).to.include({ error_code: 'CONFLICT' });
  });

  it('with only_failed sends again exactly the deliveries that ended failed', async () => {
    const hook = await subscribe(ws, receiver.url);
    // The operator status changes fail (all their attempts), the ticket updates go through.
    let failing = true;
    receiver.respond((request) => ({ kind: 'status', status: failing && header(request, 'x-webhook-event') === 'operator.status.changed' ? 500 : 200 }));
    const events = [...(await emitMany(2)), ...(await emitMany(1, () => operatorStatus(randomId()))), ...(await emitMany(2)), ...(await emitMany(1, () => operatorStatus(randomId())))];
    const doomed = events.filter((e) => e.type === 'operator.status.changed').map((e) => e.id);
    await eventually('the doomed deliveries failed', async () => {
      const failed = await ws.api('GET', `/api/v1/webhooks/${hook.id}/deliveries?status=failed`);
      return failed.body.items.length === 2;
    });
    failing = false;
    const seen = receiver.requests.length;
    const answer = await replay(hook.id, { since: 0, only_failed: true });
    expect(answer.status).to.equal(202);
    const done = await settled(hook.id, answer.body.id, 2);
    expect(done).to.include({ matched: 2, sent: 2, delivered: 2, failed: 0 });
    expect(receiver.requests.slice(seen).map(eventIdOf)).to.have.members(doomed);

    // Where nothing failed, a recovery matches nothing.
    const none = await replay(hook.id, { since: 0, only_failed: true, until: (events[0] as RecordedEvent).offset });
    expect(await settled(hook.id, none.body.id, 0)).to.include({ matched: 0, sent: 0 });
  });

  it('continues after its dispatcher thread dies mid-replay, with one delivery id per event and none lost', async () => {
    const { hook, events, liveIds } = await withHistory(60);
    receiver.respond({ kind: 'delay', ms: 40, status: 200 });
    const answer = await replay(hook.id, { since: 0 });
    await eventually('part of the replay delivered', () => replayed(receiver.requests, liveIds).length >= 10);
    const thread = test.service.dispatcherThread;
    if (thread === null || thread === undefined) throw new Error('no dispatcher thread');
    await thread.kill();
    await thread.running();
    const done = await settled(hook.id, answer.body.id, 60);
    expect(done).to.include({ matched: 60, sent: 60, delivered: 60 });
    const again = replayed(receiver.requests, liveIds);
    const idsPerEvent = new Map<string, Set<string>>();
    for (const request of again) idsPerEvent.set(eventIdOf(request), (idsPerEvent.get(eventIdOf(request)) ?? new Set()).add(header(request, 'webhook-id')));
    expect([...idsPerEvent.keys()]).to.have.members(events.map((e) => e.id));
    for (const ids of idsPerEvent.values()) expect(ids.size).to.equal(1);
  });

  it('stops when the subscription is deleted: nothing is sent once the DELETE answered', async () => {
    const { hook, liveIds } = await withHistory(80);
    receiver.respond({ kind: 'delay', ms: 50, status: 200 });
    const answer = await replay(hook.id, { since: 0 });
    await eventually('part of the replay delivered', () => replayed(receiver.requests, liveIds).length >= 5);
    expect((await ws.api('DELETE', `/api/v1/webhooks/${hook.id}`)).status).to.equal(204);
    const atDelete = receiver.requests.length;
    await settle(1_500);
    expect(receiver.requests.length).to.equal(atDelete);
    expect(replayed(receiver.requests, liveIds).length).to.be.below(80);
    expect((await ws.api('GET', `/api/v1/webhooks/${hook.id}/replays/${answer.body.id}`)).status).to.equal(404);
  });

  it('lets live deliveries through while a big replay runs', async () => {
    const { hook, liveIds } = await withHistory(200);
    receiver.respond({ kind: 'delay', ms: 20, status: 200 });
    const answer = await replay(hook.id, { since: 0 });
    await eventually('the replay under way', () => replayed(receiver.requests, liveIds).length >= 10);
    const fresh = await emitMany(3);
    await eventually('the live deliveries', () => fresh.every((e) => receiver.requests.some((r) => eventIdOf(r) === e.id)));
    // The live events went out while the replay still had most of its deliveries to send.
    const lastLive = Math.max(...fresh.map((e) => receiver.requests.findIndex((r) => eventIdOf(r) === e.id)));
    await settled(hook.id, answer.body.id, 200);
    const replayIndexes = receiver.requests.flatMap((r, i) => (liveIds.has(header(r, 'webhook-id')) || fresh.some((e) => e.id === eventIdOf(r)) ? [] : [i]));
    expect(replayIndexes).to.have.length(200);
    expect(replayIndexes.filter((i) => i > lastLive).length).to.be.above(100);
    // Nor does the replay send the live events again: they came after the request.
    for (const event of fresh) expect(receiver.requests.filter((r) => eventIdOf(r) === event.id)).to.have.length(1);
  });
});
