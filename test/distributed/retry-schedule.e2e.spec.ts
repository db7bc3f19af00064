// The retry schedule shared by the dispatchers (Redis) end to end: the roles run in this process
// (relay, an API server, dispatchers) over one SQLite log, the real Kafka of the test run and a
// private Redis this file restarts without persistence. Pending unless REDIS_URL and KAFKA_BROKERS
// are set (npm test). The tests run in order on one cluster: the second dispatcher starts in the first.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import { clusterEnv } from '../support/processes.js';
import { startReceiver, type Receiver, type ReceivedRequest } from '../support/receiver.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { emit, eventIdOf, eventually, header, settle, subscribe } from '../support/webhooks-dispatch.js';

/** Long enough to lose the schedule between the first attempts and their retries. */
const RETRY_DELAY_MS = 5000;
/** Longer than a second dispatcher takes to start; within WEBHOOK_TIMEOUT_MS. */
const SLOW_ANSWER_MS = 8000;

describe('retry schedule shared by dispatchers in Redis (e2e)', function () {
  this.timeout(120_000);
  let redis: PrivateRedis;
  let dataDir: string;
  let env: Record<string, string>;
  const services: TestService[] = [];
  const receivers: Receiver[] = [];
  let api: TestService;
  let ws: TestWorkspace;

  const start = async (role: string): Promise<TestService> => {
    const service = await startTestService({ ...env, ROLE: role }, { dataDir });
    services.push(service);
    return service;
  };

  const receiver = async (): Promise<Receiver> => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };

  const statuses = async (subscriptionId: string): Promise<Map<string, string>> => {
    const reply = await ws.api('GET', `/api/v1/webhooks/${subscriptionId}/deliveries?page_size=100`);
    expect(reply.status).to.equal(200);
    return new Map((reply.body.items as { id: string; status: string }[]).map((d) => [d.id, d.status]));
  };

  before(async function () {
    const brokers = process.env['KAFKA_BROKERS'];
    if (process.env['REDIS_URL'] === undefined || brokers === undefined || !redisServerInstalled()) this.skip();
    redis = await startPrivateRedis();
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-retry-schedule-'));
    env = {
      ...clusterEnv('retry-schedule', redis.url, brokers),
      WEBHOOK_SECRET_KEY: 'cd'.repeat(32),
      WEBHOOK_RETRY_DELAYS: Array(5).fill(`${RETRY_DELAY_MS}ms`).join(','),
      WEBHOOK_TIMEOUT_MS: '10000',
    };
    // The relay first: it creates the topic with all its partitions before a consumer subscribes.
    await start('relay');
    api = await start('api');
    await start('dispatcher');
  });

  // A workspace per test: the subscriptions of one do not take the events of the next.
  beforeEach(async () => {
    ws = await api.createWorkspace('business');
  });

  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    for (const service of services.reverse()) await service.close();
    await redis?.stop();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
  });

  it('does not send an attempt again when a dispatcher starts while another is sending it', async () => {
    const hook = await receiver();
    hook.respond({ kind: 'delay', ms: SLOW_ANSWER_MS, status: 200 });
    const sub = await subscribe(ws, hook.url);
    const event = await emit(api, ws.workspaceId);
    const id = deliveryIdOf(event.id, sub.id);
    await hook.waitForRequests(1);
    // Its start-up resume finds the delivery waiting in the log and offers it: the claim stands.
    await start('dispatcher');
    await eventually('the delivery recorded as delivered', async () => (await statuses(sub.id)).get(id) === 'delivered', 30_000);
    // Long enough for either dispatcher's pump to have taken an attempt offered again.
    await settle(2000);
    expect(hook.requests.map((r) => header(r, 'X-Webhook-Id'))).to.deep.equal([id]);
  });

  it('re-seeds the schedule from the log after Redis restarted without persistence, and every waiting delivery is still sent', async () => {
    const hook = await receiver();
    const failedOnce = new Set<string>();
    hook.respond((request: ReceivedRequest) => {
      const webhookId = header(request, 'X-Webhook-Id');
      if (failedOnce.has(webhookId)) return { kind: 'status', status: 200 };
      failedOnce.add(webhookId);
      return { kind: 'status', status: 500 };
    });
    const sub = await subscribe(ws, hook.url);
    const events = [];
    for (let i = 0; i < 6; i++) events.push(await emit(api, ws.workspaceId));
    const ids = events.map((e) => deliveryIdOf(e.id, sub.id));
    await eventually('every first attempt', () => ids.every((id) => failedOnce.has(id)), 30_000);

    const probe = new Redis(redis.url);
    try {
      // Every outcome recorded and its retry put: no claim left, one entry per delivery.
      const settled = async () => (await probe.zcard('{retry}:claimed')) === 0 && (await probe.hlen('{retry}:entries')) === ids.length;
      await eventually('every retry in the schedule', settled, 10_000);
    } finally {
      probe.disconnect();
    }
    await redis.stop();
    await redis.start();

    await eventually(
      'every delivery delivered',
      async () => {
        // The history is read from Redis too: 503 until the API server has reconnected.
        if ((await ws.api('GET', `/api/v1/webhooks/${sub.id}/deliveries?page_size=1`)).status === 503) return false;
        const status = await statuses(sub.id);
        return ids.every((id) => status.get(id) === 'delivered');
      },
      60_000,
    );
    for (const [i, event] of events.entries()) {
      const copies = hook.requests.filter((r) => eventIdOf(r) === event.id);
      expect(copies.length, 'the failed attempt and its retry').to.be.at.least(2);
      expect(new Set(copies.map((r) => header(r, 'X-Webhook-Id'))), 'one X-Webhook-Id on every attempt').to.deep.equal(new Set([ids[i]]));
    }
  });
});
