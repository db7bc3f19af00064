// The measurement both webhook fan-out benchmarks share (webhooks.ts: the embedded service; kafka.ts:
// a relay and two dispatcher processes on Kafka); each sets up its own system and hands over how to
// append to its log. 10 subscriptions on one local receiver; a burst of concurrent append batches,
// timed until every first attempt arrived (deliveries/s); then a paced phase (one small batch every
// 10 ms, 3,000 deliveries/s) for the latency from append to the first attempt received.
// The receiver is a separate process, as an endpoint would be.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { forkRole } from './forked.js';

export const ADMIN = 'bench-admin';
export const PACED_DELIVERIES_PER_S = 3000;

const SUBSCRIPTIONS = 10;
const BATCH = 100;
const PACED_EVENTS_PER_S = PACED_DELIVERIES_PER_S / SUBSCRIPTIONS;
const PACED_SECONDS = 5;
const RECEIVER_ROLE = 'WEBHOOK_BENCH_RECEIVER';

export const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
export const round = (n: number, digits = 1) => Number(n.toFixed(digits));
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Milliseconds since the epoch with sub-millisecond precision, comparable across processes. */
export const nowMs = () => performance.timeOrigin + performance.now();

type ToReceiver = { readonly until: number } | { readonly arrivals: true };
type FromReceiver = { readonly port: number } | { readonly reached: number } | { readonly arrivals: [string, number][] };

/** The receiver process: answers 200 at once and notes when each delivery's first attempt arrived. */
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

export interface Arrivals {
  readonly url: string;
  /** Resolves once `count` first attempts have arrived in all. */
  until(count: number): Promise<void>;
  /** When each delivery's first attempt arrived, by delivery id. */
  arrivals(): Promise<ReadonlyMap<string, number>>;
  close(): Promise<void>;
}

export const startArrivals = async (): Promise<Arrivals> => {
  const { child, next, close } = forkRole<FromReceiver>(fileURLToPath(import.meta.url), RECEIVER_ROLE, '1');
  const { port } = await next('port');
  return {
    url: `http://127.0.0.1:${port}/hook`,
    until: async (count) => {
      const reached = next('reached');
      child.send({ until: count } satisfies ToReceiver);
      await reached;
    },
    arrivals: async () => {
      const reply = next('arrivals');
      child.send({ arrivals: true } satisfies ToReceiver);
      return new Map((await reply).arrivals);
    },
    close,
  };
};

export interface FanoutSetup {
  readonly workspaceId: string;
  readonly apiKey: string;
  readonly subscriptionIds: readonly string[];
}

/** A workspace and its subscriptions to `receiverUrl`, through the API of a service at `serviceUrl` (admin token ADMIN). */
export const subscribeReceiver = async (serviceUrl: string, receiverUrl: string): Promise<FanoutSetup> => {
  const post = async (p: string, token: string, body: unknown) => {
    const res = await request(`${serviceUrl}${p}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await res.body.json()) as Record<string, string>;
  };
  const workspace = await post('/admin/v1/workspaces', ADMIN, { name: 'bench' });
  const subscriptionIds: string[] = [];
  for (let i = 0; i < SUBSCRIPTIONS; i++) subscriptionIds.push(String((await post('/api/v1/webhooks', String(workspace['api_key']), { url: receiverUrl }))['id']));
  return { workspaceId: String(workspace['workspace_id']), apiKey: String(workspace['api_key']), subscriptionIds };
};

export interface FanoutRun extends FanoutSetup {
  /** Burst events; each fans out to every subscription. */
  readonly events: number;
  readonly receiver: Arrivals;
  /** Appends to the log the system under test delivers from. */
  readonly append: (stream: string, events: NewEvent[]) => Promise<unknown>;
}

export interface FanoutFigures {
  readonly deliveriesPerS: number;
  readonly deliveries: number;
  /** Every delivery of the run: the burst's and the paced phase's. */
  readonly total: number;
  /** Append → first attempt received, in ms, of the burst and of the paced phase. */
  readonly burst: { readonly p50: number; readonly p99: number };
  readonly paced: { readonly p50: number; readonly p99: number };
}

export const measureFanout = async ({ events, workspaceId, subscriptionIds, receiver, append }: FanoutRun): Promise<FanoutFigures> => {
  const appendedAt = new Map<string, number>();
  const appendBatch = async (n: number): Promise<void> => {
    const batch: NewEvent[] = Array.from({ length: n }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } }));
    const at = nowMs();
    batch.forEach((e) => appendedAt.set(e.id, at));
    await append(`bench-${randomId()}`, batch);
  };
  const latencies = async (eventIds: readonly string[]) => {
    const firstSeen = await receiver.arrivals();
    const sorted = eventIds
      .flatMap((eventId) => subscriptionIds.map((s) => (firstSeen.get(deliveryIdOf(eventId, s)) ?? NaN) - (appendedAt.get(eventId) ?? NaN)))
      .sort((a, b) => a - b);
    return { p50: percentile(sorted, 50), p99: percentile(sorted, 99) };
  };
  const deliveries = events * subscriptionIds.length;

  // Burst: every event appended at once, in concurrent batches (as concurrent API writers would).
  const burstStart = nowMs();
  await Promise.all(Array.from({ length: events / BATCH }, () => appendBatch(BATCH)));
  await receiver.until(deliveries);
  const deliveriesPerS = deliveries / ((nowMs() - burstStart) / 1000);
  const burstIds = [...appendedAt.keys()];
  const burst = await latencies(burstIds);

  // Paced: one small batch every 10 ms, below the measured throughput, for the append→receipt latency.
  appendedAt.clear();
  const perTick = PACED_EVENTS_PER_S / 100;
  for (let tick = 0; tick < PACED_SECONDS * 100; tick++) {
    await appendBatch(perTick);
    await sleep(10);
  }
  const pacedIds = [...appendedAt.keys()];
  const total = (burstIds.length + pacedIds.length) * subscriptionIds.length;
  await receiver.until(total);
  return { deliveriesPerS, deliveries, total, burst, paced: await latencies(pacedIds) };
};

if (process.env[RECEIVER_ROLE] === '1') await receiverProcess();
