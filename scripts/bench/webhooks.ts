// Webhook delivery benchmark: the real service on its SQLite log fans 10,000 events out to 10
// subscriptions on one local receiver (100,000 deliveries, every attempt recorded as an event), beside
// a bare undici POST loop to the same receiver in the same process (the ceiling). Then a paced phase
// (3,000 deliveries/s) measures the latency from append to the first attempt received. The receiver
// is a separate process, as an endpoint would be.
// `npm run bench -- webhooks [--long]` (--long: 50,000 events in the burst).
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { startService } from '../../src/service.js';

const SUBSCRIPTIONS = 10;
const BATCH = 100;
const PACED_EVENTS_PER_S = 300;
const PACED_SECONDS = 5;
const ADMIN = 'bench-admin';
const RECEIVER_ROLE = 'WEBHOOK_BENCH_RECEIVER';

const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const round = (n: number, digits = 1) => Number(n.toFixed(digits));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes. */
const nowMs = () => performance.timeOrigin + performance.now();

type ToReceiver = { readonly until: number } | { readonly arrivals: true };
type FromReceiver = { readonly port: number } | { readonly reached: number } | { readonly arrivals: [string, number][] };

/**
 * The receiver runs in its own process, as a real endpoint would: it answers 200 at once and notes
 * when each delivery's first attempt arrived.
 */
const receiverProcess = async (): Promise<void> => {
  const firstSeen = new Map<string, number>();
  let until = Number.POSITIVE_INFINITY;
  const server = createServer((req, res) => {
    req.on('data', () => undefined);
    req.on('end', () => {
      const id = req.headers['x-webhook-id'];
      if (typeof id === 'string' && req.headers['x-webhook-attempt'] === '1' && !firstSeen.has(id)) firstSeen.set(id, nowMs());
      res.writeHead(200).end();
      if (firstSeen.size >= until) {
        until = Number.POSITIVE_INFINITY;
        process.send?.({ reached: firstSeen.size } satisfies FromReceiver);
      }
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.on('message', (message: ToReceiver) => {
    if ('arrivals' in message) process.send?.({ arrivals: [...firstSeen] } satisfies FromReceiver);
    else if (firstSeen.size >= message.until) process.send?.({ reached: firstSeen.size } satisfies FromReceiver);
    else until = message.until;
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ port: (server.address() as AddressInfo).port } satisfies FromReceiver);
};

const startArrivals = async () => {
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ['--import', 'tsx'], env: { ...process.env, [RECEIVER_ROLE]: '1' } });
  const next = <K extends string>(key: K) =>
    new Promise<Extract<FromReceiver, Record<K, unknown>>>((resolve) => {
      const listener = (message: FromReceiver) => {
        if (!(key in message)) return;
        child.off('message', listener);
        resolve(message as Extract<FromReceiver, Record<K, unknown>>);
      };
      child.on('message', listener);
    });
  const { port } = await next('port');
  return {
    url: `http://127.0.0.1:${port}/hook`,
    until: async (count: number) => {
      const reached = next('reached');
      child.send({ until: count } satisfies ToReceiver);
      await reached;
    },
    arrivals: async () => {
      const reply = next('arrivals');
      child.send({ arrivals: true } satisfies ToReceiver);
      return new Map((await reply).arrivals);
    },
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
};

/** The ceiling: the same number of POSTs of an envelope-sized body, as many in flight as the dispatcher allows. */
const bareLoop = async (url: string, total: number, concurrency: number): Promise<number> => {
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  const body = Buffer.from(JSON.stringify({ id: randomId(), type: 'ticket.updated', timestamp: new Date().toISOString(), workspace_id: randomId(), data: { ticket_id: randomId() }, _links: {} }));
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
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-webhooks-'));
  const receiver = await startArrivals();
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
  const service = await startService(config);
  try {
    const api = async (method: string, p: string, token: string, body: unknown) => {
      const res = await request(`${service.url}${p}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      return (await res.body.json()) as Record<string, string>;
    };
    const workspace = await api('POST', '/admin/v1/workspaces', ADMIN, { name: 'bench' });
    const workspaceId = String(workspace['workspace_id']);
    const subscriptionIds: string[] = [];
    for (let i = 0; i < SUBSCRIPTIONS; i++) subscriptionIds.push(String((await api('POST', '/api/v1/webhooks', String(workspace['api_key']), { url: receiver.url }))['id']));

    const appendedAt = new Map<string, number>();
    const appendBatch = async (n: number): Promise<void> => {
      const batch: NewEvent[] = Array.from({ length: n }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } }));
      const at = nowMs();
      batch.forEach((e) => appendedAt.set(e.id, at));
      await service.core.log.append(`bench-${randomId()}`, batch, 'no_stream');
    };
    const latencies = (eventIds: readonly string[], firstSeen: ReadonlyMap<string, number>): number[] =>
      eventIds
        .flatMap((eventId) => subscriptionIds.map((s) => (firstSeen.get(deliveryIdOf(eventId, s)) ?? NaN) - (appendedAt.get(eventId) ?? NaN)))
        .sort((a, b) => a - b);

    // Burst: every event appended at once, in concurrent batches (as concurrent API writers would).
    const burstStart = nowMs();
    await Promise.all(Array.from({ length: events / BATCH }, () => appendBatch(BATCH)));
    await receiver.until(events * SUBSCRIPTIONS);
    const deliveriesPerS = (events * SUBSCRIPTIONS) / ((nowMs() - burstStart) / 1000);
    const burstIds = [...appendedAt.keys()];
    const burstLatency = latencies(burstIds, await receiver.arrivals());

    // Paced: one small batch every 10 ms, below the measured throughput, for the append→receipt latency.
    appendedAt.clear();
    const perTick = PACED_EVENTS_PER_S / 100;
    for (let tick = 0; tick < PACED_SECONDS * 100; tick++) {
      await appendBatch(perTick);
      await sleep(10);
    }
    const pacedIds = [...appendedAt.keys()];
    await receiver.until((burstIds.length + pacedIds.length) * SUBSCRIPTIONS);
    const paced = latencies(pacedIds, await receiver.arrivals());

    const ceiling = await bareLoop(receiver.url, events * SUBSCRIPTIONS, config.webhooks.maxInFlight);
    return {
      bench: 'webhooks',
      deliveries_per_s: Math.round(deliveriesPerS),
      p99_ms: round(percentile(paced, 99)),
      p50_ms: round(percentile(paced, 50)),
      paced_deliveries_per_s: PACED_EVENTS_PER_S * SUBSCRIPTIONS,
      burst_p99_ms: round(percentile(burstLatency, 99)),
      ceiling_per_s: Math.round(ceiling),
      share_of_ceiling: round(deliveriesPerS / ceiling, 2),
      deliveries: events * SUBSCRIPTIONS,
    };
  } finally {
    await service.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.env[RECEIVER_ROLE] === '1') await receiverProcess();
