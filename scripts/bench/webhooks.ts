// Webhook delivery benchmark: the real service on its SQLite log fans 10,000 events out to 10
// subscriptions on one local receiver (100,000 deliveries, every attempt recorded as an event), beside
// a bare undici POST loop to the same receiver in the same process (the ceiling); the phases are
// fanout.ts's (burst throughput, then paced latency from append to the first attempt received).
// BENCH_SECRETS=2 rotates every subscription's secret first (grace period of an hour), so every
// attempt is signed with two secrets; each run also times the signature headers of one attempt with
// one and with two secrets, beside one bare HMAC-SHA256 of the body (that part's ceiling).
// `npm run bench -- webhooks [--long]` (--long: 50,000 events in the burst).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createHmac } from 'node:crypto';
import { Agent, request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { randomId } from '../../src/shared/ids.js';
import { systemMicros } from '../../src/log/clock.js';
import { startService } from '../../src/service.js';
import { newWebhookSecret } from '../../src/webhooks/secrets.js';
import { signatureHeaders } from '../../src/webhooks/signature.js';
import { ADMIN, measureFanout, PACED_DELIVERIES_PER_S, round, startArrivals, subscribeReceiver } from './fanout.js';

const envelopeSized = (): Buffer =>
  Buffer.from(JSON.stringify({ id: randomId(), type: 'ticket.updated', timestamp: new Date().toISOString(), workspace_id: randomId(), data: { ticket_id: randomId() }, _links: {} }));

const SIGNING_CALLS = 10_000;
const SIGNING_ROUNDS = 7;

/** µs of CPU per call of `work`, over SIGNING_CALLS calls. */
const microsPerCall = (work: () => unknown): number => {
  const started = performance.now();
  for (let i = 0; i < SIGNING_CALLS; i++) work();
  return ((performance.now() - started) * 1000) / SIGNING_CALLS;
};

/**
 * The signature headers of one attempt with one secret and with two (a rotation's grace period), and
 * one bare HMAC (the ceiling): the fastest of interleaved rounds, as the machine's other load only adds.
 */
const signingCost = () => {
  const body = envelopeSized();
  const one = { current: newWebhookSecret(), previous: null };
  const two = { current: newWebhookSecret(), previous: { secret: newWebhookSecret(), expiresAt: Number.MAX_SAFE_INTEGER } };
  const now = systemMicros();
  const works = {
    hmac: () => createHmac('sha256', one.current).update(body).digest(),
    one: () => signatureHeaders(one, 'delivery', now, body),
    two: () => signatureHeaders(two, 'delivery', now, body),
  };
  const best = { hmac: Infinity, one: Infinity, two: Infinity };
  for (let round = 0; round < SIGNING_ROUNDS; round++) {
    for (const name of ['hmac', 'one', 'two'] as const) best[name] = Math.min(best[name], microsPerCall(works[name]));
  }
  return best;
};

/** Rotates every subscription's secret, with an hour of grace: its deliveries are signed with both. */
const rotateAll = async (serviceUrl: string, apiKey: string, subscriptionIds: readonly string[]): Promise<void> => {
  for (const id of subscriptionIds) {
    const res = await request(`${serviceUrl}/api/v1/webhooks/${id}/secret/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ grace_period_seconds: 3600 }),
    });
    if (res.statusCode !== 200) throw new Error(`rotating ${id}: ${res.statusCode} ${await res.body.text()}`);
    await res.body.dump();
  }
};

/** The ceiling: the same number of POSTs of an envelope-sized body, as many in flight as the dispatcher allows. */
const bareLoop = async (url: string, total: number, concurrency: number): Promise<number> => {
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  const body = envelopeSized();
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < total) {
        sent++;
        const res = await request(url, { dispatcher: agent, method: 'POST', body, headers: { 'content-type': 'application/json', 'x-webhook-id': 'bare', 'x-webhook-attempt': '0' } });
        await res.body.dump();
      }
    }),
  );
  const perS = total / ((performance.now() - started) / 1000);
  await agent.close();
  return perS;
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const events = opts.long ? 50_000 : 10_000;
  const secrets = process.env['BENCH_SECRETS'] === '2' ? 2 : 1;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-webhooks-'));
  const receiver = await startArrivals();
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
  const service = await startService(config);
  try {
    const setup = await subscribeReceiver(service.url, receiver.url);
    if (secrets === 2) await rotateAll(service.url, setup.apiKey, setup.subscriptionIds);
    const fanout = await measureFanout({ ...setup, events, receiver, append: (stream, batch) => service.core.log.append(stream, batch, 'no_stream') });
    const ceiling = await bareLoop(receiver.url, fanout.deliveries, config.webhooks.maxInFlight);
    const signing = signingCost();
    return {
      bench: 'webhooks',
      secrets_per_delivery: secrets,
      deliveries_per_s: Math.round(fanout.deliveriesPerS),
      p99_ms: round(fanout.paced.p99),
      p50_ms: round(fanout.paced.p50),
      paced_deliveries_per_s: PACED_DELIVERIES_PER_S,
      burst_p99_ms: round(fanout.burst.p99),
      ceiling_per_s: Math.round(ceiling),
      share_of_ceiling: round(fanout.deliveriesPerS / ceiling, 2),
      deliveries: fanout.deliveries,
      signing_us_one_secret: round(signing.one, 2),
      signing_us_two_secrets: round(signing.two, 2),
      signing_ceiling_one_hmac_us: round(signing.hmac, 2),
    };
  } finally {
    await service.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
