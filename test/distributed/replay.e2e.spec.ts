// History replay in the distributed mode with real processes: an API server records the replay, the
// dispatchers (Kafka consumer group, shared Redis schedule and leases) drive it. One replay is driven
// by one dispatcher at a time and each event gets one replayed delivery id; a driving dispatcher
// killed with SIGKILL leaves the replay to the other, which continues from the cursor in the log.
// Pending unless REDIS_URL and KAFKA_BROKERS are set (npm test).
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { privateCluster, privateClusterPossible, type PrivateCluster, type ProcessGroup, type RoleProcess } from '../support/processes.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call } from '../support/server.js';
import { verdictOf } from '../support/standard-webhooks.js';
import { eventIdOf, eventually, header } from '../support/webhooks-dispatch.js';

const ADMIN = 'replay-admin-token';
const TICKETS = 30;

describe('webhook history replay in the distributed mode (e2e)', function () {
  this.timeout(180_000);
  let cluster: PrivateCluster;
  let group: ProcessGroup;
  let receiver: Receiver;

  before(async function () {
    if (!privateClusterPossible()) this.skip();
    cluster = await privateCluster('replay', {
      ADMIN_TOKEN: ADMIN,
      WEBHOOK_SECRET_KEY: 'cd'.repeat(32),
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      WEBHOOK_TIMEOUT_MS: '2000',
      // Two at a time to the slow receiver: the replay lasts long enough to kill its driver midway.
      WEBHOOK_MAX_IN_FLIGHT_PER_SUBSCRIPTION: '2',
      RATE_LIMIT_PER_IP: '1000000',
      // Short, so the other dispatcher takes over soon after the kill; the driver renews it every second.
      WEBHOOK_REPLAY_LEASE_MS: '3000',
    });
    group = cluster.group;
    await group.start('relay', { ROLE: 'relay' });
    receiver = await startReceiver();
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
  });

  after(async () => {
    await cluster?.stop();
    await receiver?.close();
  });

  it('replays once per event, and another dispatcher continues after the driving one is killed', async () => {
    const api = await group.start('api', { ROLE: 'api' });
    const first: RoleProcess = await group.start('dispatcher-1', { ROLE: 'dispatcher' });
    const created = await call(`${api.url}/admin/v1/workspaces`, 'POST', ADMIN, { name: 'replay', plan: 'business' });
    const key = String(created.body.api_key);
    const hook = await call(`${api.url}/api/v1/webhooks`, 'POST', key, { url: receiver.url });
    expect(hook.status).to.equal(201);
    for (let i = 0; i < TICKETS; i++) {
      const ticket = await call(`${api.url}/api/v1/tickets`, 'POST', key, { contact: { email: `c${i}@example.com` }, subject: 'Help', message: 'hello' });
      expect(ticket.status, JSON.stringify(ticket.body)).to.equal(201);
    }
    const feed = await call(`${api.url}/api/v1/updates?offset=0&limit=1000&timeout=0`, 'GET', key);
    const eventIds = (feed.body.items as { id: string }[]).map((item) => item.id);
    await eventually('the live deliveries', () => receiver.requests.length >= eventIds.length, 60_000);
    const liveIds = new Set(receiver.requests.map((r) => header(r, 'webhook-id')));
    const replayed = () => receiver.requests.filter((r) => !liveIds.has(header(r, 'webhook-id')));

    // The only dispatcher drives the replay (30 events at two deliveries a second); a second one joins;
    // the first dies mid-replay.
    receiver.respond({ kind: 'delay', ms: 1000, status: 200 });
    const answer = await call(`${api.url}/api/v1/webhooks/${hook.body.id}/replay`, 'POST', key, { since: 0 });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(202);
    await eventually('part of the replay', () => replayed().length >= 5, 60_000);
    const second = await group.start('dispatcher-2', { ROLE: 'dispatcher' });
    const before = replayed().length;
    first.kill('SIGKILL');
    await first.exited;
    expect(before).to.be.below(eventIds.length);
    // Killed midway: the rest need not be slow.
    receiver.respond({ kind: 'status', status: 200 });

    const done = await eventually(
      'the replay completed by the other dispatcher',
      async () => {
        const p = (await call(`${api.url}/api/v1/webhooks/${hook.body.id}/replays/${answer.body.id}`, 'GET', key)).body;
        return p.status === 'completed' && p.delivered === eventIds.length && p;
      },
      120_000,
    );
    expect(done).to.include({ matched: eventIds.length, sent: eventIds.length, failed: 0 });
    const idsPerEvent = new Map<string, Set<string>>();
    for (const request of replayed()) idsPerEvent.set(eventIdOf(request), (idsPerEvent.get(eventIdOf(request)) ?? new Set()).add(header(request, 'webhook-id')));
    expect([...idsPerEvent.keys()]).to.have.members(eventIds);
    for (const ids of idsPerEvent.values()) expect(ids.size).to.equal(1);
    const lib = new Webhook(String(hook.body.secret));
    for (const request of replayed()) expect(verdictOf(lib, request).ok).to.equal(true);
    second.kill();
  });
});
