// Outage benchmark: a receiver down for a while, then back. The real service (embedded, its delivery
// thread) on a temp folder, 10 subscriptions on one receiver in another process. First the ceiling:
// a burst of BENCH_EVENTS events (20,000; --long: 100,000) delivered to the receiver answering 200,
// deliveries/s. Then 100 events/s for 20 s, each delivery refused once: how late each retry (parked
// meanwhile) goes out after its due time, by the engine's own count (its punctuality histogram). Then the receiver answers 503: the burst
// again, every first attempt refused and waiting for its retry; the delivery threads' heap is sampled
// before and with that backlog (the least of twenty samples over 10 s: what stays after a
// collection, near enough). The service is stopped, the retries fall due meanwhile, the receiver
// answers 200 again and the service is started on the same folder: its start, then how fast it drains
// the whole backlog it owes at once (deliveries/s beside the ceiling), the delivery threads' heap at
// most meanwhile, and the p99 of an API request sent every 50 ms while it drains. Every delivery must
// arrive once (`lost` and `repeated` 0).
// `npm run bench -- outage [--long]`.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { randomId } from '../../src/shared/ids.js';
import { startService, type Service } from '../../src/service.js';
import { ADMIN, round, sleep, subscribeReceiver, type FanoutSetup } from './fanout.js';
import { forkRole } from './forked.js';
import { metricsText, punctual, scrapePunctuality, since } from './engine-punctuality.js';
import { quantiles } from './quantiles.js';
import { workerHeapUsed } from './stall-watch.js';

const ROLE = 'OUTAGE_BENCH_RECEIVER';
const BATCH = 100;
const PACED_EVENTS_PER_S = 100;
const PACED_S = 20;
/**
 * The retry delay: longer than the outage's burst takes to be refused (at 4,000/s, half what the
 * thread does here), so that no delivery is refused twice before the receiver is back (six refusals
 * fail it, and five failed deliveries in a row deactivate the subscription), and parked meanwhile.
 */
const retryDelayS = (deliveries: number): number => 15 + Math.ceil(deliveries / 4_000);

type ToReceiver = { readonly answer: number } | { readonly counts: true } | { readonly reset: true };
interface Counts {
  /** Distinct deliveries answered 2xx, and when the first and last of them were. */
  readonly delivered: number;
  readonly firstDeliveredAt: number | null;
  readonly lastDeliveredAt: number | null;
  readonly refused: number;
  /** Deliveries answered 2xx more than once. */
  readonly repeated: number;
}
type FromReceiver = { readonly port: number } | { readonly counts: Counts } | { readonly done: true };

/** The receiver process: answers what it is told, counts by delivery id. */
const receiverProcess = async (): Promise<void> => {
  let status = 200;
  let delivered = new Map<string, number>();
  let refused = 0;
  let first: number | null = null;
  let last: number | null = null;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const answer = status;
      if (answer < 300) {
        const id = String(req.headers['x-webhook-id']);
        delivered.set(id, (delivered.get(id) ?? 0) + 1);
        first ??= Date.now();
        last = Date.now();
      } else refused++;
      res.writeHead(answer).end();
    });
  });
  server.keepAliveTimeout = 65_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  process.on('message', (message: ToReceiver) => {
    if ('answer' in message) {
      status = message.answer;
      process.send?.({ done: true } satisfies FromReceiver);
    } else if ('reset' in message) {
      [delivered, refused, first, last] = [new Map(), 0, null, null];
      process.send?.({ done: true } satisfies FromReceiver);
    } else {
      const repeated = [...delivered.values()].filter((n) => n > 1).length;
      process.send?.({ counts: { delivered: delivered.size, firstDeliveredAt: first, lastDeliveredAt: last, refused, repeated } } satisfies FromReceiver);
    }
  });
  process.on('disconnect', () => process.exit(0));
  process.send?.({ port: (server.address() as AddressInfo).port } satisfies FromReceiver);
};

const startReceiver = async () => {
  const { child, next, close } = forkRole<FromReceiver>(fileURLToPath(import.meta.url), ROLE, '1');
  const { port } = await next('port');
  const ask = async (message: ToReceiver): Promise<void> => {
    const done = next('done');
    child.send(message);
    await done;
  };
  return {
    url: `http://127.0.0.1:${port}/hook`,
    answer: (status: number) => ask({ answer: status }),
    reset: () => ask({ reset: true }),
    counts: async (): Promise<Counts> => {
      const reply = next('counts');
      child.send({ counts: true } satisfies ToReceiver);
      return (await reply).counts;
    },
    close,
  };
};

/** The delivery threads' heap in use (the dispatcher's and its index thread's), NaN when the thread did not answer in time. */
const workerHeapBytes = async (serviceUrl: string): Promise<number> => workerHeapUsed(await metricsText(serviceUrl, ADMIN)) ?? NaN;

/** The least of twenty samples 500 ms apart: the heap a collection leaves, near enough. */
const retainedHeapBytes = async (serviceUrl: string): Promise<number> => {
  let least = Infinity;
  for (let n = 0; n < 20; n++) {
    const heap = await workerHeapBytes(serviceUrl);
    if (!Number.isNaN(heap)) least = Math.min(least, heap);
    await sleep(500);
  }
  return least;
};

const mb = (bytes: number): number => round(bytes / 1024 / 1024);

/** Appends `events` public events of the workspace at once, in concurrent batches (as concurrent writers would). */
const burst = async (service: Service, workspaceId: string, events: number): Promise<void> => {
  await Promise.all(
    Array.from({ length: Math.ceil(events / BATCH) }, (_, n) =>
      service.core.log.append(
        `bench-${randomId()}`,
        Array.from({ length: Math.min(BATCH, events - n * BATCH) }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } })),
        'no_stream',
      ),
    ),
  );
};

/** Resolves with the receiver's counts once `done` says they are complete. */
const until = async (receiver: Awaited<ReturnType<typeof startReceiver>>, done: (counts: Counts) => boolean): Promise<Counts> => {
  for (;;) {
    const counts = await receiver.counts();
    if (done(counts)) return counts;
    await sleep(100);
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_EVENTS'] ?? (opts.long ? 100_000 : 20_000));
  const retryS = retryDelayS(events * 10);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-outage-'));
  const receiver = await startReceiver();
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: ADMIN,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    WEBHOOK_RETRY_DELAYS: Array<string>(5).fill(`${retryS}s`).join(','),
  });
  let service: Service | null = await startService(config);
  try {
    const setup: FanoutSetup = await subscribeReceiver(service.url, receiver.url);
    const deliveries = events * setup.subscriptionIds.length;

    // The ceiling: the same deliveries, the receiver answering.
    const ceilingStart = Date.now();
    await burst(service, setup.workspaceId, events);
    const ceilingCounts = await until(receiver, (c) => c.delivered >= deliveries);
    const ceilingPerS = deliveries / (((ceilingCounts.lastDeliveredAt as number) - ceilingStart) / 1000);
    console.log(`ceiling: ${deliveries} deliveries at ${Math.round(ceilingPerS)}/s`);

    // Punctuality: events at 100/s for 20 s, each delivery refused once, so that the retries (parked
    // meanwhile) fall due at a tenth of what the thread sends, the receiver answering again by then.
    await receiver.reset();
    await receiver.answer(503);
    const punctualDeliveries = PACED_EVENTS_PER_S * PACED_S * setup.subscriptionIds.length;
    const engineBefore = await scrapePunctuality([service.url], ADMIN);
    for (let tick = 0; tick < PACED_S * 10; tick++) {
      await burst(service, setup.workspaceId, PACED_EVENTS_PER_S / 10);
      await sleep(100);
    }
    await until(receiver, (c) => c.refused >= punctualDeliveries);
    await receiver.answer(200);
    await until(receiver, (c) => c.delivered >= punctualDeliveries);
    const late = punctual(since(engineBefore, await scrapePunctuality([service.url], ADMIN)), 'webhook_attempt_start_delay_seconds', 'attempt="retry"', 0.1);
    console.log(`retries: ${late.count} sent ${retryS} s after a refusal, by the engine's count ${round(late.within * 100)}% within 100 ms of due, p99 at most ${late.p99AtMostMs} ms`);

    // The outage: every first attempt refused, every delivery waiting for its retry.
    await receiver.reset();
    await receiver.answer(503);
    const heapBefore = await retainedHeapBytes(service.url);
    await burst(service, setup.workspaceId, events);
    await until(receiver, (c) => c.refused >= deliveries);
    const lastRefusedAt = Date.now();
    const waiting = async (): Promise<number> =>
      ((await request(`${(service as Service).url}/admin/v1/webhooks/backlog`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.body.json())) as { waiting: number }).waiting;
    // Each failure is recorded, and its retry scheduled, a moment after the receiver answered.
    const backlog = { waiting: await waiting() };
    for (let n = 0; n < 100 && backlog.waiting < deliveries; n++) {
      await sleep(100);
      backlog.waiting = await waiting();
    }
    const heapWithBacklog = await retainedHeapBytes(service.url);
    console.log(
      `outage: ${backlog.waiting} deliveries waiting; delivery threads' heap ${mb(heapBefore)} MB before, ${mb(heapWithBacklog)} MB with them (${Math.round((heapWithBacklog - heapBefore) / deliveries)} bytes each)`,
    );
    await service.close();
    service = null;

    // Every retry falls due while the service is down: started again, it owes them all at once.
    await sleep(Math.max(0, lastRefusedAt + retryS * 1000 + 1_000 - Date.now()));
    await receiver.reset();
    await receiver.answer(200);
    const startedAt = Date.now();
    service = await startService(config);
    const startMs = Date.now() - startedAt;
    const url = service.url;
    let heapMax = 0;
    const latencies: number[] = [];
    let draining = true;
    const sampling = (async () => {
      while (draining) {
        const sent = performance.now();
        const res = await request(`${url}/api/v1/webhooks`, { headers: { authorization: `Bearer ${setup.apiKey}` } });
        await res.body.dump();
        latencies.push(performance.now() - sent);
        // A thread busy past the metrics' wait is left out of that sample.
        const heap = await workerHeapBytes(url);
        if (!Number.isNaN(heap)) heapMax = Math.max(heapMax, heap);
        await sleep(50);
      }
    })();
    const drained = await until(receiver, (c) => c.delivered >= deliveries || (c.lastDeliveredAt !== null && Date.now() - c.lastDeliveredAt > 30_000));
    draining = false;
    await sampling;
    const drainPerS = drained.delivered / (((drained.lastDeliveredAt as number) - startedAt - startMs) / 1000);
    const api = quantiles(latencies);
    console.log(
      `back: started in ${startMs} ms, drained ${drained.delivered} of ${deliveries} at ${Math.round(drainPerS)}/s (ceiling ${Math.round(ceilingPerS)}/s); ` +
        `delivery threads' heap at most ${mb(heapMax)} MB; API p99 ${round(api.p99)} ms meanwhile`,
    );
    return {
      bench: 'outage',
      deliveries,
      retry_delay_s: retryS,
      ceiling_per_s: Math.round(ceilingPerS),
      waiting_in_outage: backlog.waiting,
      heap_mb_before: mb(heapBefore),
      heap_mb_with_backlog: mb(heapWithBacklog),
      heap_bytes_per_waiting: Math.round((heapWithBacklog - heapBefore) / deliveries),
      retries_within_100ms: round(late.within, 4),
      retries_late_p99_at_most_ms: late.p99AtMostMs,
      restart_ms: startMs,
      drain_per_s: Math.round(drainPerS),
      drain_share_of_ceiling: round(drainPerS / ceilingPerS, 2),
      heap_mb_max_while_draining: mb(heapMax),
      api_p99_ms_while_draining: round(api.p99),
      lost: deliveries - drained.delivered,
      repeated: drained.repeated,
    };
  } finally {
    await service?.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (process.env[ROLE] === '1') await receiverProcess();
