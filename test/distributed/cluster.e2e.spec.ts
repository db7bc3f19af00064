// The distributed mode end to end on one machine, with real processes: two API servers, the relay
// and two dispatchers over one shared SQLite log, the real Kafka of the test run (KAFKA_BROKERS) and
// a private Redis this file can stop. Pending unless REDIS_URL and KAFKA_BROKERS are set (npm test).
// The tests run in order on one cluster: a dispatcher killed in one is replaced before the next.
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import { randomId } from '../../src/shared/ids.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { clusterEnv, createProcessGroup, socketOwner, type ProcessGroup, type RoleProcess } from '../support/processes.js';
import { startReceiver, type Receiver, type ReceivedRequest } from '../support/receiver.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { call, type Reply } from '../support/server.js';
import { verdictOf } from '../support/standard-webhooks.js';
import { eventIdOf, eventually, header, settle } from '../support/webhooks-dispatch.js';

const ADMIN = 'distributed-admin-token';
const RATE_LIMIT_PER_KEY = 100;
/** Long enough to kill a dispatcher between the first attempts and the retries. */
const RETRY_DELAY_MS = 4000;

interface Workspace {
  readonly workspaceId: string;
  readonly apiKey: string;
  /** Calls the API on server `on` (0: A, 1: B). */
  api(on: number, method: string, path: string, body?: unknown): Promise<Reply>;
}

describe('distributed mode with real processes (e2e)', function () {
  this.timeout(120_000);
  let redis: PrivateRedis;
  let group: ProcessGroup;
  let dataDir: string;
  let apis: RoleProcess[] = [];
  let dispatchers: RoleProcess[] = [];
  let env: Record<string, string>;
  const receivers: Receiver[] = [];

  before(async function () {
    const brokers = process.env['KAFKA_BROKERS'];
    if (process.env['REDIS_URL'] === undefined || brokers === undefined || !redisServerInstalled()) this.skip();
    redis = await startPrivateRedis();
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-distributed-'));
    env = {
      ...clusterEnv('distributed', redis.url, brokers),
      DATA_DIR: dataDir,
      ADMIN_TOKEN: ADMIN,
      WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      WEBHOOK_RETRY_DELAYS: Array(5).fill(`${RETRY_DELAY_MS}ms`).join(','),
      WEBHOOK_TIMEOUT_MS: '1000',
      RATE_LIMIT_PER_KEY: String(RATE_LIMIT_PER_KEY),
      RATE_LIMIT_PER_IP: '1000000',
    };
    group = createProcessGroup(env);
    // The relay first: it creates the topic with all its partitions before a consumer subscribes.
    await group.start('relay', { ROLE: 'relay' });
    apis = await Promise.all([group.start('api-a', { ROLE: 'api' }), group.start('api-b', { ROLE: 'api' })]);
    dispatchers = await Promise.all([group.start('dispatcher-1', { ROLE: 'dispatcher' }), group.start('dispatcher-2', { ROLE: 'dispatcher' })]);
    receivers.push(await startReceiver(), await startReceiver());
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
  });

  after(async () => {
    await group?.stopAll();
    await Promise.all(receivers.map((r) => r.close()));
    await redis?.stop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  const createWorkspace = async (): Promise<Workspace> => {
    const created = await call(`${apis[0]?.url}/admin/v1/workspaces`, 'POST', ADMIN, { name: 'distributed', plan: 'business' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const apiKey = String(created.body.api_key);
    // The other server learns of the key from the shared log (an unknown key does not count against it:
    // this is the key's one counted request).
    await eventually('the key on server B', async () => (await call(`${apis[1]?.url}/api/v1/tickets`, 'GET', apiKey)).status === 200);
    return {
      workspaceId: String(created.body.workspace_id),
      apiKey,
      api: (on, method, p, body) => call(`${apis[on]?.url}${p}`, method, apiKey, body),
    };
  };

  const createTicket = async (ws: Workspace, on: number): Promise<void> => {
    const reply = await ws.api(on, 'POST', '/api/v1/tickets', { contact: { email: `${randomId().slice(0, 10)}@example.com` }, subject: 'Help', message: 'hello' });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
  };

  const subscribe = async (ws: Workspace, receiver: Receiver): Promise<string> => {
    const created = await ws.api(0, 'POST', '/api/v1/webhooks', { url: receiver.url, description: 'distributed' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return String(created.body.id);
  };

  /** The workspace's public events: what its subscriptions must all receive. */
  const feedIds = async (ws: Workspace): Promise<string[]> => {
    const feed = await ws.api(1, 'GET', '/api/v1/updates?offset=0&limit=1000&timeout=0');
    expect(feed.status).to.equal(200);
    return (feed.body.items as { id: string }[]).map((item) => item.id);
  };

  const received = (): ReceivedRequest[] => receivers.flatMap((r) => r.requests);

  /** Waits until every (event, subscription) pair arrived; checks that repeats carry the same id and bytes. */
  const expectAllDelivered = async (eventIds: readonly string[], subscriptionIds: readonly string[], timeoutMs: number): Promise<void> => {
    const expected = eventIds.flatMap((eventId) => subscriptionIds.map((sub) => ({ eventId, webhookId: deliveryIdOf(eventId, sub) })));
    await eventually(
      `${expected.length} deliveries`,
      () => {
        const seen = new Set(received().map((r) => header(r, 'X-Webhook-Id')));
        return expected.every((e) => seen.has(e.webhookId));
      },
      timeoutMs,
    );
    const requests = received();
    for (const { eventId, webhookId } of expected) {
      const copies = requests.filter((r) => header(r, 'X-Webhook-Id') === webhookId);
      for (const copy of copies) {
        expect(eventIdOf(copy)).to.equal(eventId);
        expect(copy.body.equals(copies[0]?.body ?? Buffer.alloc(0)), 'a repeat sends the same bytes').to.equal(true);
      }
    }
  };

  it('shares the rate limit of a key across the two API servers', async () => {
    const ws = await createWorkspace();
    const used = 1;
    const statuses: number[] = [];
    for (let i = 0; i < RATE_LIMIT_PER_KEY + 20; i++) statuses.push((await ws.api(i % 2, 'GET', '/api/v1/tickets')).status);
    // Each server alone would allow the whole limit (no 429 at all): together they allow it once. A
    // Redis command slower than its timeout on this busy machine fails open, so a few extra may pass.
    expect(statuses.filter((s) => s === 200).length).to.be.at.least(RATE_LIMIT_PER_KEY - used);
    expect(statuses.filter((s) => s === 429).length).to.be.at.least(10);
    expect(statuses.slice(0, RATE_LIMIT_PER_KEY - used).every((s) => s === 200), 'nothing refused within the limit').to.equal(true);
  });

  it('wakes a long poll on server A with a write on server B', async () => {
    const ws = await createWorkspace();
    const poll = ws.api(0, 'GET', '/api/v1/updates?offset=0&timeout=30');
    await settle(500);
    await createTicket(ws, 1);
    const reply = await poll;
    expect(reply.status).to.equal(200);
    // At its timeout a poll that was never woken answers empty.
    expect(reply.body.items).to.not.be.empty;
  });

  it('delivers every event of a burst to every subscription while a dispatcher is killed with SIGKILL', async () => {
    // Several workspaces, so their partitions spread over both dispatchers.
    const workspaces = await Promise.all([createWorkspace(), createWorkspace(), createWorkspace()]);
    const subscriptions = await Promise.all(workspaces.map(async (ws) => ({ ws, ids: [await subscribe(ws, receivers[0] as Receiver), await subscribe(ws, receivers[1] as Receiver)] })));
    const before = received().length;
    const wave = (n: number) => Promise.all(workspaces.flatMap((ws) => Array.from({ length: n }, (_, i) => createTicket(ws, i % 2))));
    await wave(4);
    await eventually('the first deliveries', () => received().length > before, 20_000);
    const killed = dispatchers[0] as RoleProcess;
    killed.kill('SIGKILL');
    await wave(4);
    await killed.exited;
    await wave(4);

    try {
      // The dead dispatcher's partitions move once Kafka drops it from the group (its session timeout,
      // KAFKA_SESSION_TIMEOUT_MS), and its claims in the schedule once their lease ends.
      for (const { ws, ids } of subscriptions) await expectAllDelivered(await feedIds(ws), ids, 75_000);
    } finally {
      // Replaced even when this test fails: the next one kills a dispatcher too, and must leave one.
      dispatchers = [await group.start('dispatcher-3', { ROLE: 'dispatcher' }), dispatchers[1] as RoleProcess];
    }
  });

  it('fires the retries that fall due while a dispatcher is dead from the other one', async () => {
    const ws = await createWorkspace();
    const ids = [await subscribe(ws, receivers[0] as Receiver), await subscribe(ws, receivers[1] as Receiver)];
    const failedOnce = new Set<string>();
    /** Which dispatcher sent each first attempt: the one that made most of them is killed. */
    const senders = new Map<RoleProcess, number>();
    const failFirst = (request: ReceivedRequest) => {
      const id = header(request, 'X-Webhook-Id');
      if (failedOnce.has(id)) return { kind: 'status', status: 200 } as const;
      failedOnce.add(id);
      const sender = socketOwner(request.remotePort, dispatchers);
      if (sender !== undefined) senders.set(sender, (senders.get(sender) ?? 0) + 1);
      return { kind: 'status', status: 500 } as const;
    };
    receivers.forEach((r) => r.respond(failFirst));
    try {
      for (let i = 0; i < 6; i++) await createTicket(ws, i % 2);
      const eventIds = await feedIds(ws);
      const webhookIds = eventIds.flatMap((eventId) => ids.map((sub) => deliveryIdOf(eventId, sub)));
      await eventually('every first attempt', () => webhookIds.every((id) => failedOnce.has(id)), 20_000);
      // Their outcomes recorded and their retries put back in the schedule, well before they fall due.
      await settle(500);
      const [killed] = [...senders].sort((a, b) => b[1] - a[1])[0] ?? [];
      expect(killed, 'the sender of the first attempts').to.not.equal(undefined);
      killed?.kill('SIGKILL');
      await killed?.exited;
      const copies = (id: string) => received().filter((r) => header(r, 'X-Webhook-Id') === id).length;
      await eventually('every retry (the failed attempt and its retry)', () => webhookIds.every((id) => copies(id) >= 2), 30_000);
      await expectAllDelivered(eventIds, ids, 0);
      // The survivor sent every retry, and its punctuality histogram at /admin/v1/metrics counted them.
      const survivor = dispatchers.find((d) => d !== killed) as RoleProcess;
      const metrics = await fetch(`${survivor.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.text());
      const retries = Number(/^webhook_attempt_start_delay_seconds_count\{attempt="retry"\} (\d+)$/m.exec(metrics)?.[1]);
      expect(retries).to.be.at.least(webhookIds.length);
      // Its Kafka consumer's crashes counted, by what followed: none stopped it for good.
      expect(metrics).to.match(/^kafka_consumer_crashes_total\{outcome="stopped"\} 0$/m);
      // Its /readyz tells the admin token the cluster's backlog (the Redis schedule's): soon nothing waits.
      await eventually('the backlog empty at /readyz', async () => {
        const ready = await fetch(`${survivor.url}/readyz`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.json());
        return JSON.stringify(ready) === JSON.stringify({ status: 'ready', webhooks: { waiting: 0, oldest_due_seconds: 0 } });
      });
    } finally {
      receivers.forEach((r) => r.respond({ kind: 'status', status: 200 }));
    }
  });

  it('answers a delivery history and a manual retry on an API server, and a dispatcher sends the new round', async () => {
    const ws = await createWorkspace();
    const hook = receivers[0] as Receiver;
    const sub = await subscribe(ws, hook);
    hook.respond({ kind: 'status', status: 500 });
    try {
      await createTicket(ws, 0);
      const [eventId] = await feedIds(ws);
      const id = deliveryIdOf(String(eventId), sub);
      const copies = () => received().filter((r) => header(r, 'X-Webhook-Id') === id);
      await eventually('the first attempt', () => copies().length === 1, 20_000);
      // Deactivated well before its retry falls due: the delivery is cancelled.
      expect((await ws.api(0, 'PATCH', `/api/v1/webhooks/${sub}`, { is_active: false })).status).to.equal(200);
      const history = async () => {
        const items = (await ws.api(1, 'GET', `/api/v1/webhooks/${sub}/deliveries`)).body.items as { id: string; status: string; round: number; attempts: unknown[] }[];
        return items.find((d) => d.id === id);
      };
      await eventually('the delivery cancelled', async () => (await history())?.status === 'cancelled', 20_000);
      expect(await history()).to.include({ round: 1 });
      expect((await history())?.attempts).to.have.length(1);
      const inactive = await ws.api(1, 'POST', `/api/v1/webhooks/${sub}/deliveries/${id}/retry`);
      expect(inactive.status).to.equal(409);
      expect(inactive.body.error_code).to.equal('CONFLICT');
      expect((await ws.api(1, 'POST', `/api/v1/webhooks/${sub}/deliveries/${'0'.repeat(32)}/retry`)).status).to.equal(404);

      expect((await ws.api(0, 'PATCH', `/api/v1/webhooks/${sub}`, { is_active: true })).status).to.equal(200);
      hook.respond({ kind: 'status', status: 200 });
      // Server B may learn of the re-activation a moment after server A answered it.
      const retried = await eventually('the retry accepted', async () => {
        const reply = await ws.api(1, 'POST', `/api/v1/webhooks/${sub}/deliveries/${id}/retry`);
        return reply.status === 202 && reply;
      });
      expect(retried.body).to.include({ id, status: 'waiting', round: 2, attempt: 0 });
      await eventually('the new round sent by a dispatcher', () => copies().length === 2, 20_000);
      expect(header(copies()[1] as ReceivedRequest, 'X-Webhook-Attempt')).to.equal('1');
      await eventually('delivered in round 2', async () => (await history())?.status === 'delivered', 20_000);
      const again = await ws.api(0, 'POST', `/api/v1/webhooks/${sub}/deliveries/${id}/retry`);
      expect(again.status).to.equal(409);
      await settle(500);
      expect(copies(), 'one attempt per round').to.have.length(2);
    } finally {
      hook.respond({ kind: 'status', status: 200 });
    }
  });

  it('signs with the rotated secrets at send time on the dispatchers: a retry scheduled before a rotation on server B is sent with both', async () => {
    const ws = await createWorkspace();
    const hook = receivers[1] as Receiver;
    const created = await ws.api(0, 'POST', '/api/v1/webhooks', { url: hook.url, events: ['ticket.created'] });
    expect(created.status).to.equal(201);
    const [sub, old] = [String(created.body.id), String(created.body.secret)];
    hook.respondOnce({ kind: 'status', status: 500 });
    await createTicket(ws, 0);
    const [eventId] = await feedIds(ws);
    const id = deliveryIdOf(String(eventId), sub);
    const copies = () => hook.requests.filter((r) => header(r, 'X-Webhook-Id') === id);
    await eventually('the first attempt', () => copies().length === 1, 20_000);
    const rotation = await ws.api(1, 'POST', `/api/v1/webhooks/${sub}/secret/rotate`, { grace_period_seconds: 3600 });
    expect(rotation.status, JSON.stringify(rotation.body)).to.equal(200);
    const fresh = String(rotation.body.secret);
    expect(copies(), 'the retry still waits when the rotation is answered').to.have.length(1);
    await eventually('the retry', () => copies().length === 2, 20_000);
    const [first, retry] = copies() as [ReceivedRequest, ReceivedRequest];
    const verifies = (secret: string, request: ReceivedRequest) => verdictOf(new Webhook(secret), request).ok;
    expect([verifies(old, first), verifies(fresh, first)]).to.deep.equal([true, false]);
    expect([verifies(old, retry), verifies(fresh, retry)]).to.deep.equal([true, true]);
    expect(verifySignature(old, retry.body, header(retry, 'X-Webhook-Signature'))).to.equal(true);
  });

  it('answers a DELETE once the dispatchers stopped sending to the subscription: one that cannot (stopped with SIGSTOP) is waited for, up to a bound, and sends nothing to it once running again', async () => {
    const ws = await createWorkspace();
    const receiver = receivers[0] as Receiver;
    const sub = await subscribe(ws, receiver);
    // The dispatchers are told over Redis and each acknowledges; a stopped one holds the answer until
    // the bound (2 s), as a dispatcher whose event loop is stuck would.
    for (const d of dispatchers) d.kill('SIGSTOP');
    try {
      // Its events wait in Kafka for the stopped dispatchers, which meet them after the DELETE.
      await createTicket(ws, 0);
      const started = performance.now();
      const deleted = await ws.api(1, 'DELETE', `/api/v1/webhooks/${sub}`);
      expect(deleted.status).to.equal(204);
      expect(performance.now() - started, 'the DELETE waited for the stopped dispatchers').to.be.at.least(1_500);
    } finally {
      for (const d of dispatchers) d.kill('SIGCONT');
    }
    expect((await ws.api(0, 'DELETE', `/api/v1/webhooks/${sub}`)).status).to.equal(404);
    const toDeleted = new Set((await feedIds(ws)).map((eventId) => deliveryIdOf(eventId, sub)));
    expect(toDeleted.size).to.be.greaterThan(0);
    await settle(1_000);
    expect(receiver.requests.filter((r) => toDeleted.has(header(r, 'X-Webhook-Id'))), 'deliveries to the deleted subscription').to.deep.equal([]);
  });

  it('serves one shared copy of the read models: what one server answered, the other reads at once', async () => {
    const ws = await createWorkspace();
    for (let i = 0; i < 6; i++) {
      const [writer, reader] = [i % 2, (i + 1) % 2];
      const created = await ws.api(writer, 'POST', '/api/v1/tickets', { contact: { email: `shared-${i}@example.com` }, subject: `shared ${i}`, message: 'hello' });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const id = String(created.body.id);
      expect((await ws.api(reader, 'GET', `/api/v1/tickets/${id}`)).body).to.deep.equal(created.body);
      const closed = await ws.api(writer, 'POST', `/api/v1/tickets/${id}/close`);
      expect(closed.status).to.equal(200);
      expect((await ws.api(reader, 'GET', `/api/v1/tickets/${id}`)).body).to.deep.equal(closed.body);
      expect((await ws.api(reader, 'GET', '/api/v1/tickets?status=closed')).body.total).to.equal(i + 1);
    }
  });

  it('answers 64 writers on one ticket across both API servers with 201 each, and publishes each message once', async () => {
    const ws = await createWorkspace();
    const opened = await ws.api(0, 'POST', '/api/v1/tickets', { contact: { email: `busy-${randomId().slice(0, 8)}@example.com` }, message: 'hello' });
    const id = String(opened.body.id);
    // Polled gently: every request counts against the key's limit of 100.
    const gently = (what: string, probe: () => Promise<boolean>) => eventually(what, async () => (await probe()) || (await settle(250), false), 20_000);
    await gently('the ticket on server B', async () => (await ws.api(1, 'GET', `/api/v1/tickets/${id}`)).status === 200);
    const statuses = await Promise.all(Array.from({ length: 64 }, async (_, i) => (await ws.api(i % 2, 'POST', `/api/v1/tickets/${id}/messages`, { content: `writer ${i}` })).status));
    expect(statuses.filter((s) => s !== 201)).to.deep.equal([]);
    const listed = await ws.api(1, 'GET', `/api/v1/tickets/${id}/messages?page_size=100`);
    const contents = (listed.body.items as { content: string }[]).map((m) => m.content).filter((c) => c.startsWith('writer '));
    expect(new Set(contents).size).to.equal(64);
    expect(contents).to.have.length(64);
    let published: { data: { content: string }; offset: number }[] = [];
    await gently('64 messages in /updates', async () => {
      const feed = await ws.api(0, 'GET', '/api/v1/updates?offset=0&types=message.created&limit=1000&timeout=0');
      published = (feed.body.items as typeof published).filter((e) => e.data.content.startsWith('writer '));
      return published.length >= 64;
    });
    expect(published.map((e) => e.data.content).sort()).to.deep.equal([...contents].sort());
    const offsets = published.map((e) => e.offset);
    expect(offsets).to.deep.equal([...offsets].sort((a, b) => a - b));
    expect(new Set(offsets).size).to.equal(64);
  });

  it('replays on server B the answer server A gave under an Idempotency-Key, and acts once', async () => {
    const ws = await createWorkspace();
    const body = { contact: { email: `idem-${randomId().slice(0, 8)}@example.com` }, subject: `idem ${randomId()}`, message: 'hello' };
    const send = (on: number) => call(`${apis[on]?.url}/api/v1/tickets`, 'POST', ws.apiKey, body, { 'idempotency-key': 'cross-server-1' });
    const first = await send(0);
    expect(first.status, JSON.stringify(first.body)).to.equal(201);
    const again = await send(1);
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    const listed = await ws.api(1, 'GET', '/api/v1/tickets?page_size=100');
    expect((listed.body.items as { subject: string }[]).filter((t) => t.subject === body.subject)).to.have.length(1);
  });

  it('stops a disabled or deleted key at once on the other API server', async () => {
    const ws = await createWorkspace();
    for (let round = 0; round < 5; round++) {
      const issued = await call(`${apis[0]?.url}/admin/v1/workspaces/${ws.workspaceId}/keys`, 'POST', ADMIN);
      const { key_id: keyId, api_key: key } = issued.body as { key_id: string; api_key: string };
      const status = round % 2 === 0 ? 'disabled' : 'deleted';
      const patched = await call(`${apis[0]?.url}/admin/v1/workspaces/${ws.workspaceId}/keys/${keyId}`, 'PATCH', ADMIN, { status });
      expect(patched.status).to.equal(200);
      // The very next request, on the server that did not make the change.
      expect((await call(`${apis[1]?.url}/api/v1/tickets`, 'GET', key)).status, `${status} key on server B`).to.equal(401);
    }
  });

  it('answers 503 for tickets while Redis is down, writes nothing then, and rebuilds the read models when Redis comes back empty', async () => {
    const ws = await createWorkspace();
    await createTicket(ws, 0);
    const listed = await ws.api(1, 'GET', '/api/v1/tickets');
    expect(listed.body.total).to.equal(1);
    const events = await feedIds(ws);
    await redis.stop();
    let late: RoleProcess | undefined;
    try {
      // An API server starting meanwhile serves what does not need Redis, and 503 for the rest.
      late = await group.start('api-late', { ROLE: 'api' }, { ready: false });
      const lateApi = (p: string) => call(`${late?.url}${p}`, 'GET', ws.apiKey);
      expect((await fetch(`${late.url}/healthz`)).status).to.equal(200);
      expect((await lateApi('/api/v1/tickets')).status).to.equal(503);
      expect((await lateApi('/api/v1/updates?offset=0&limit=1000&timeout=0')).body.items.map((item: { id: string }) => item.id)).to.deep.equal(events);
      for (let i = 0; i < 4; i++) {
        const reply = await ws.api(i % 2, 'GET', '/api/v1/tickets');
        expect(reply.status, JSON.stringify(reply.body)).to.equal(503);
        expect(reply.body.error_code).to.equal('SERVICE_UNAVAILABLE');
        expect(reply.headers.get('retry-after')).to.equal('1');
      }
      const refused = await ws.api(0, 'POST', '/api/v1/tickets', { contact: { email: 'during-outage@example.com' }, message: 'hello' });
      expect(refused.status, JSON.stringify(refused.body)).to.equal(503);
      // The log still answers (the rate limit fails open), and the refused write left nothing in it.
      expect(await feedIds(ws)).to.deep.equal(events);
    } finally {
      await redis.start();
    }
    // This Redis keeps nothing across a restart: the API servers rebuild the read models from the log.
    // While they rebuild they answer 503, never a partial list.
    const partial: unknown[] = [];
    await eventually(
      'the ticket listed again on every server',
      async () => {
        const replies = await Promise.all([...apis.map((api) => api.url), late?.url].map((url) => call(`${url}/api/v1/tickets`, 'GET', ws.apiKey)));
        const whole = (r: Reply) => r.status === 200 && JSON.stringify(r.body) === JSON.stringify(listed.body);
        partial.push(...replies.filter((r) => r.status === 200 && !whole(r)).map((r) => r.body));
        if (replies.every(whole)) return true;
        // Each try spends three of the key's 100 requests a minute: a client reconnecting after a long
        // outage waits up to 2 s between its tries, which 10 ms polls would not outlast.
        await settle(250);
        return false;
      },
      30_000,
    );
    expect(partial).to.deep.equal([]);
    late?.kill();
    // Reconnecting takes each client up to its backoff; a poll that missed its wake-up answers empty.
    await eventually(
      'a long poll woken across servers',
      async () => {
        const next = Number((await ws.api(0, 'GET', '/api/v1/updates?offset=0&limit=1000&timeout=0')).body.next_offset);
        const poll = ws.api(0, 'GET', `/api/v1/updates?offset=${next}&timeout=5`);
        await settle(300);
        await createTicket(ws, 1);
        const reply = await poll;
        return reply.status === 200 && reply.body.items.length > 0;
      },
      30_000,
    );
  });
});
