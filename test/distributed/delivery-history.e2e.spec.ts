// The delivery history of the distributed mode, shared in Redis, end to end with real processes: the
// relay, an API server and two dispatchers over one SQLite log, the real Kafka of the test run and a
// private Redis this file stops and restarts without persistence. The API server pages from the index
// the dispatchers keep, each in a thread of its own; a restarting dispatcher takes over what waits
// from it, not from the history; a Redis that lost everything gets the index rebuilt from the log and
// the schedule re-seeded; a Redis that does not answer is a 503. Pending unless REDIS_URL and KAFKA_BROKERS are set (npm test). The
// tests run in order on one cluster.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { DELIVERY_INDEX_VERSION } from '../../projections/deliveries-index.js';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import { randomId } from '../../src/shared/ids.js';
import { privateCluster, privateClusterPossible, type PrivateCluster, type ProcessGroup, type RoleProcess } from '../support/processes.js';
import { startReceiver, type Receiver, type ReceivedRequest } from '../support/receiver.js';
import type { PrivateRedis } from '../support/redis-server.js';
import { call } from '../support/server.js';
import { nicesOf, threadsOf } from '../support/threads.js';
import { eventually, header } from '../support/webhooks-dispatch.js';

const ADMIN = 'delivery-history-admin-token';
/** Long enough to kill the dispatchers, or lose Redis, between the first attempts and their retries. */
const RETRY_DELAY_MS = 4000;
/** Deliveries of the settled history the first test leaves behind. */
const HISTORY = 40;
/** The index's keys (no prefix in the services). */
const TAG = `{dh:v${DELIVERY_INDEX_VERSION}}`;

interface Delivery {
  readonly id: string;
  readonly status: string;
}

describe('delivery history shared in Redis by the distributed roles (e2e)', function () {
  this.timeout(180_000);
  let cluster: PrivateCluster;
  let redis: PrivateRedis;
  let group: ProcessGroup;
  let api: RoleProcess;
  let dispatchers: RoleProcess[] = [];
  let receiver: Receiver;
  /** The key of this test's workspace: a workspace per test, so its tickets reach its subscriptions only. */
  let apiKey: string;
  /** The subscription of the settled history (first test), and its workspace's key. */
  let historySub: string;
  let historyKey: string;
  let started = 0;

  const startDispatcher = async () => group.start(`dispatcher-${++started}`, { ROLE: 'dispatcher' });
  const get = (p: string, key = apiKey) => call(`${api.url}${p}`, 'GET', key);

  before(async function () {
    if (!privateClusterPossible()) this.skip();
    cluster = await privateCluster('delivery-history', {
      ADMIN_TOKEN: ADMIN,
      WEBHOOK_SECRET_KEY: 'ef'.repeat(32),
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      WEBHOOK_RETRY_DELAYS: Array(5).fill(`${RETRY_DELAY_MS}ms`).join(','),
      WEBHOOK_TIMEOUT_MS: '1000',
      RATE_LIMIT_PER_KEY: '1000000',
      RATE_LIMIT_PER_IP: '1000000',
    });
    ({ group, redis } = cluster);
    // The relay first: it creates the topic with all its partitions before a consumer subscribes.
    await group.start('relay', { ROLE: 'relay' });
    api = await group.start('api', { ROLE: 'api' });
    dispatchers = await Promise.all([startDispatcher(), startDispatcher()]);
    receiver = await startReceiver();
  });

  beforeEach(async () => {
    const created = await call(`${api.url}/admin/v1/workspaces`, 'POST', ADMIN, { name: 'history', plan: 'business' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    apiKey = String(created.body.api_key);
  });

  afterEach(function () {
    if (this.currentTest?.state === 'failed') console.log(group.outputs());
  });

  after(async () => {
    await cluster?.stop();
    await receiver?.close();
  });

  /** A subscription to the receiver for ticket.created only: one delivery per ticket. */
  const subscribe = async (): Promise<string> => {
    const created = await call(`${api.url}/api/v1/webhooks`, 'POST', apiKey, { url: receiver.url, events: ['ticket.created'] });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    return String(created.body.id);
  };

  /** Creates `count` tickets, one after the other; resolves with their ticket.created event ids. */
  const tickets = async (count: number): Promise<string[]> => {
    for (let i = 0; i < count; i++) {
      const reply = await call(`${api.url}/api/v1/tickets`, 'POST', apiKey, { contact: { email: `${randomId().slice(0, 10)}@example.com` }, subject: 'History', message: 'hello' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
    }
    const feed = await get('/api/v1/updates?offset=0&types=ticket.created&limit=1000&timeout=0');
    return (feed.body.items as { id: string }[]).slice(-count).map((e) => e.id);
  };

  /** Every delivery of a subscription, following the cursors `pageSize` at a time. */
  const history = async (subscriptionId: string, pageSize = 100): Promise<Delivery[]> => {
    const key = subscriptionId === historySub ? historyKey : apiKey;
    const items: Delivery[] = [];
    for (let cursor: string | null = null; ; ) {
      const reply = await get(`/api/v1/webhooks/${subscriptionId}/deliveries?page_size=${pageSize}${cursor === null ? '' : `&cursor=${cursor}`}`, key);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      items.push(...(reply.body.items as Delivery[]));
      cursor = reply.body.next_cursor as string | null;
      if (cursor === null) return items;
    }
  };

  const allDelivered = async (subscriptionId: string, ids: readonly string[]): Promise<boolean> => {
    const statuses = new Map((await history(subscriptionId)).map((d) => [d.id, d.status]));
    return ids.every((id) => statuses.get(id) === 'delivered');
  };

  const withRedis = async <T>(use: (probe: Redis) => Promise<T>): Promise<T> => {
    const probe = new Redis(redis.url);
    try {
      return await use(probe);
    } finally {
      probe.disconnect();
    }
  };

  /**
   * A new subscription whose receiver fails each delivery's first attempt and answers 200 to the next
   * ones, and `count` tickets for it: `run` gets their delivery ids once every first attempt failed.
   */
  const withFailedFirstAttempts = async (count: number, run: (sub: string, ids: readonly string[]) => Promise<void>): Promise<void> => {
    const failedOnce = new Set<string>();
    receiver.respond((request: ReceivedRequest) => {
      const id = header(request, 'X-Webhook-Id');
      if (failedOnce.has(id)) return { kind: 'status', status: 200 };
      failedOnce.add(id);
      return { kind: 'status', status: 500 };
    });
    try {
      const sub = await subscribe();
      const ids = (await tickets(count)).map((eventId) => deliveryIdOf(eventId, sub));
      await eventually('every first attempt', () => ids.every((id) => failedOnce.has(id)), 30_000);
      await run(sub, ids);
    } finally {
      receiver.respond({ kind: 'status', status: 200 });
    }
  };

  it('serves the history pages from the index in Redis, each delivery once, newest first', async () => {
    historySub = await subscribe();
    historyKey = apiKey;
    const ids = (await tickets(HISTORY)).map((eventId) => deliveryIdOf(eventId, historySub));
    await eventually('every delivery listed as delivered', () => allDelivered(historySub, ids), 60_000);
    const paged = await history(historySub, 7);
    expect(paged.map((d) => d.id).sort()).to.deep.equal([...ids].sort());
    // The API server has no copy of its own: it lists what the dispatchers wrote to Redis, in its order.
    const indexed = await withRedis((probe) => probe.zrevrange(`${TAG}:s:${historySub}`, 0, -1));
    expect(paged.map((d) => d.id)).to.deep.equal(indexed);
    const delivered = await get(`/api/v1/webhooks/${historySub}/deliveries?status=failed`);
    expect(delivered.body).to.include({ next_cursor: null });
    expect(delivered.body.items).to.deep.equal([]);
  });

  it('keeps the index in a thread of its own in each dispatcher, ten below the thread that sends, its heap in the metrics', async function () {
    if (process.platform !== 'linux') this.skip();
    for (const dispatcher of dispatchers) {
      const pid = dispatcher.child.pid as number;
      const threads = threadsOf(pid);
      expect(threads.find((t) => t.tid === pid)?.nice, 'the main thread, which sends').to.equal(0);
      expect(nicesOf(threads, 'delivery-index')).to.deep.equal([10]);
      // The process's heap figures leave the thread's out.
      const metrics = await fetch(`${dispatcher.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } });
      expect(await metrics.text()).to.match(/^nodejs_worker_heap_size_used_bytes\{thread="webhook-history-index"\} [1-9]\d*$/m);
    }
  });

  it('restarts a dispatcher from the waiting deliveries of the index, reading none of the settled history, and their retries go out', async () => {
    await withFailedFirstAttempts(3, async (sub, ids) => {
      await eventually(
        'their retries waiting in the index',
        async () => {
          const listed = await history(sub);
          return listed.length === ids.length && listed.every((d) => d.status === 'waiting');
        },
        10_000,
      );
      for (const dispatcher of dispatchers) dispatcher.kill('SIGKILL');
      await Promise.all(dispatchers.map((d) => d.exited));
      const restarted = await startDispatcher();
      dispatchers = [restarted];
      const line = /delivery history: (\d+) deliveries taken over from the index, (\d+) delivery records read since start/.exec(group.outputs(1000).split('\n--- ').find((section) => section.startsWith(restarted.name)) ?? '');
      expect(line, 'the restored line of the new dispatcher').to.not.equal(null);
      const [taken, read] = [Number(line?.[1]), Number(line?.[2])];
      expect(taken, 'the waiting deliveries').to.equal(ids.length);
      // The settled history holds at least two records per delivery (scheduled, delivered): none is read again.
      expect(read, 'delivery records read at start').to.be.below(HISTORY);
      await eventually('every retry delivered', () => allDelivered(sub, ids), 60_000);
      const attempts = (id: string) => receiver.requests.filter((r) => header(r, 'X-Webhook-Id') === id).length;
      expect(ids.map(attempts)).to.deep.equal([2, 2, 2]);
    });
    dispatchers.push(await startDispatcher());
  });

  it('rebuilds the index from the log and re-seeds the schedule from it after Redis restarted without persistence', async () => {
    await withFailedFirstAttempts(4, async (sub, ids) => {
      // Every outcome recorded and its retry in the schedule: nothing claimed, one entry per delivery.
      await eventually('every retry scheduled', () => withRedis(async (probe) => (await probe.zcard('{retry}:claimed')) === 0 && (await probe.hlen('{retry}:entries')) === ids.length), 10_000);
      await redis.stop();
      await redis.start();
      await eventually('every retry delivered', () => allDelivered(sub, ids).catch(() => false), 90_000);
      // The settled history too, whole again.
      await eventually('the earlier history listed again', async () => (await history(historySub).catch(() => [])).length === HISTORY, 30_000);
      expect((await history(historySub)).every((d) => d.status === 'delivered')).to.equal(true);
    });
  });

  it('answers 503 for the history and a manual retry while Redis does not answer, and pages again once it does', async () => {
    const [first] = await history(historySub, 1);
    redis.pause();
    try {
      const page = await get(`/api/v1/webhooks/${historySub}/deliveries`, historyKey);
      expect(page.status, JSON.stringify(page.body)).to.equal(503);
      expect(page.body.error_code).to.equal('SERVICE_UNAVAILABLE');
      expect(page.headers.get('retry-after')).to.equal('1');
      const retry = await call(`${api.url}/api/v1/webhooks/${historySub}/deliveries/${first?.id}/retry`, 'POST', historyKey);
      expect(retry.status, JSON.stringify(retry.body)).to.equal(503);
      expect(retry.body.error_code).to.equal('SERVICE_UNAVAILABLE');
      // The server itself is fine meanwhile.
      expect((await fetch(`${api.url}/healthz`)).status).to.equal(200);
    } finally {
      redis.resume();
    }
    await eventually('the history paged again', async () => (await get(`/api/v1/webhooks/${historySub}/deliveries?page_size=1`, historyKey)).status === 200, 20_000);
    expect((await history(historySub, 1))[0]).to.deep.equal(first);
  });
});
