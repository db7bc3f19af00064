// Delivery-history pages at a million deliveries: the embedded service in its own process (ROLE=all)
// over a log holding BENCH_DELIVERIES (1,000,000) settled deliveries of one subscription, recorded
// straight into the log as the dispatcher records them (packed delivery.recorded events of 100
// deliveries, spread over the last 20 days, mixed event types and outcomes), then indexed by the
// service's own dispatcher thread from the log at its first start. Reported: that first start (the
// index built from the log) and a second one (resumed from the index's checkpoint); then, for
// BENCH_SECONDS (30; --long: 120) while tickets are written at 20/s (their deliveries go on being
// recorded and indexed), the p99 of deliveries pages (first pages, status, event type, time ranges,
// combinations, the page after a cursor) of the big subscription and of one with a few deliveries,
// and of an unrelated request (GET /api/v1/webhooks) sent meanwhile. The ceiling, measured in the
// same run: the bare SQLite indexed select behind a page, on the index file, from this process.
// `npm run bench -- deliveries-history [--long]`; with BENCH_ROLE=api, the distributed mode instead
// (API server and dispatcher sharing the index in Redis: deliveries-history-distributed.ts).
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { DELIVERY_HISTORY_FILE } from '../../projections/deliveries-index-sqlite.js';
import { isoMicros } from '../../src/domain/envelope.js';
import { createProcessGroup, type ProcessGroup } from '../../test/support/processes.js';
import { send } from '../torture/http.js';
import { DELIVERY_EVENT_TYPES as TYPES, HISTORY_SPAN_US as SPAN_US, recordHistory } from './delivery-records.js';
import { quantiles } from './quantiles.js';

const ADMIN = 'bench-admin';
const READERS = 4;
const WRITES_PER_S = 20;
const SMALL = 10;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const must = async (url: string, method: string, p: string, token: string, body?: unknown) => {
  const sent = await send(url, { method, path: p, token, ...(body === undefined ? {} : { body }) });
  if (sent.kind !== 'answer' || sent.answer.status >= 300) throw new Error(`${method} ${p}: ${JSON.stringify(sent)}`);
  return sent.answer.body as Record<string, unknown>;
};

/** Writes tickets at WRITES_PER_S until stopped (their deliveries go to every subscription); `stop` resolves with how many. */
export const ticketWriter = (url: string, key: string, prefix: string): { stop(): Promise<number> } => {
  let running = true;
  let writes = 0;
  const done = (async () => {
    for (let n = 0; running; n++) {
      const next = performance.now() + 1000 / WRITES_PER_S;
      await must(url, 'POST', '/api/v1/tickets', key, { subject: `${prefix}${n}`, contact: { email: `c${n % 100}@example.com` }, message: 'hello' });
      writes++;
      await sleep(Math.max(0, next - performance.now()));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return writes;
    },
  };
};

/** A page query of the big subscription, at random: the shapes integrators send. */
const randomQuery = (oldest: number, newest: number): string => {
  const at = encodeURIComponent(isoMicros(oldest + Math.floor(Math.random() * (newest - oldest))));
  const type = TYPES[Math.floor(Math.random() * TYPES.length)] as string;
  const shapes = [
    '',
    '?status=failed',
    `?event_type=${type}`,
    `?created_before=${at}`,
    `?status=delivered&event_type=${type}&created_before=${at}`,
    `?status=cancelled&created_from=${at}`,
    '?page_size=100',
  ];
  return shapes[Math.floor(Math.random() * shapes.length)] as string;
};

/** The ceiling: the indexed select behind a first page or a page after a key, on the index file itself. */
const bareSelects = (dataDir: string, subscriptionId: string, oldest: number, newest: number, count: number): number[] => {
  const db = new Database(path.join(dataDir, DELIVERY_HISTORY_FILE), { readonly: true });
  const select = db.prepare('SELECT json FROM deliveries INDEXED BY d_sub WHERE sub = ? AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 21').pluck();
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const began = performance.now();
    const rows = select.all(subscriptionId, oldest + Math.floor(Math.random() * (newest - oldest)), 'f') as string[];
    rows.map((json) => JSON.parse(json) as unknown);
    times.push(performance.now() - began);
  }
  db.close();
  return times;
};

export interface PageFigures {
  readonly pages: ReturnType<typeof quantiles>;
  readonly few: ReturnType<typeof quantiles>;
  readonly unrelated: ReturnType<typeof quantiles>;
  readonly writes: number;
}

/**
 * For `seconds`, while tickets are written at WRITES_PER_S: READERS readers page the big
 * subscription (random queries, then the page after their cursor) and the small one, and an
 * unrelated request is timed meanwhile. `ceiling` runs at the end, while the load still runs.
 */
export const measurePages = async <C>(
  target: { readonly url: string; readonly key: string; readonly big: string; readonly small: string; readonly seconds: number },
  ceiling: (oldest: number, newest: number) => Promise<C>,
): Promise<PageFigures & { readonly ceiling: C }> => {
  const { url, key, big, small } = target;
  const newest = Date.now() * 1000;
  const oldest = newest - SPAN_US;
  const timed = async (p: string): Promise<{ ms: number; body: Record<string, unknown> }> => {
    const start = performance.now();
    const sent = await send(url, { method: 'GET', path: p, token: key });
    const ms = performance.now() - start;
    if (sent.kind !== 'answer' || sent.answer.status !== 200) throw new Error(`GET ${p}: ${JSON.stringify(sent)}`);
    return { ms, body: sent.answer.body as Record<string, unknown> };
  };
  const first = await timed(`/api/v1/webhooks/${big}/deliveries?page_size=100`);
  if ((first.body['items'] as unknown[]).length !== 100) throw new Error('the big history is not listed');

  let running = true;
  const bigPages: number[] = [];
  const smallPages: number[] = [];
  const other: number[] = [];
  const writer = ticketWriter(url, key, 't');
  const readers = Array.from({ length: READERS }, async () => {
    while (running) {
      const page = await timed(`/api/v1/webhooks/${big}/deliveries${randomQuery(oldest, newest)}`);
      bigPages.push(page.ms);
      const cursor = page.body['next_cursor'];
      if (typeof cursor === 'string') bigPages.push((await timed(`/api/v1/webhooks/${big}/deliveries?cursor=${cursor}`)).ms);
      smallPages.push((await timed(`/api/v1/webhooks/${small}/deliveries`)).ms);
    }
  });
  const unrelated = (async () => {
    while (running) {
      other.push((await timed('/api/v1/webhooks')).ms);
      await sleep(20);
    }
  })();
  await sleep(target.seconds * 1000);
  const measured = await ceiling(oldest, newest);
  running = false;
  const [writes] = await Promise.all([writer.stop(), unrelated, ...readers]);
  return { pages: quantiles(bigPages), few: quantiles(smallPages), unrelated: quantiles(other), writes, ceiling: measured };
};

export const report = (deliveries: number, figures: PageFigures, ceiling: ReturnType<typeof quantiles>, ceilingWhat: string): void => {
  console.error(`pages of ${deliveries} deliveries: p50 ${figures.pages.p50} ms, p99 ${figures.pages.p99} ms (${figures.pages.n} pages)`);
  console.error(`pages of ~${SMALL} deliveries:      p50 ${figures.few.p50} ms, p99 ${figures.few.p99} ms (${figures.few.n} pages)`);
  console.error(`unrelated GET /api/v1/webhooks meanwhile: p50 ${figures.unrelated.p50} ms, p99 ${figures.unrelated.p99} ms`);
  console.error(`ceiling, ${ceilingWhat}: p50 ${ceiling.p50} ms, p99 ${ceiling.p99} ms`);
  console.error(`${figures.writes} tickets written meanwhile (${WRITES_PER_S}/s); load average after: ${loadavg()[0]?.toFixed(2)}`);
};

/** The figures of measurePages in the benchmark's JSON line. */
export const pageFields = (figures: PageFigures) => ({
  page_p50_ms: figures.pages.p50,
  page_p99_ms: figures.pages.p99,
  pages: figures.pages.n,
  small_history_page_p99_ms: figures.few.p99,
  unrelated_request_p99_ms: figures.unrelated.p99,
  tickets_written_meanwhile: figures.writes,
});

/** A log holding `deliveries` settled deliveries of subscription `big` and SMALL of `small`, made with the service `prepare` started. */
export const prepareHistory = async (
  prepare: () => Promise<{ readonly url: string; kill(signal?: NodeJS.Signals): void; readonly exited: Promise<void> }>,
  dataDir: string,
  receiverUrl: string,
  deliveries: number,
): Promise<{ key: string; big: string; small: string }> => {
  const service = await prepare();
  const workspace = await must(service.url, 'POST', '/admin/v1/workspaces', ADMIN, { name: 'bench', plan: 'bench' });
  const key = String(workspace['api_key']);
  const workspaceId = String(workspace['workspace_id']);
  const big = String((await must(service.url, 'POST', '/api/v1/webhooks', key, { url: `${receiverUrl}/big` }))['id']);
  const small = String((await must(service.url, 'POST', '/api/v1/webhooks', key, { url: `${receiverUrl}/small` }))['id']);
  service.kill('SIGTERM');
  await service.exited;
  console.error(`recording ${deliveries} deliveries into the log`);
  const file = path.join(dataDir, 'events.sqlite');
  await recordHistory(file, workspaceId, big, deliveries);
  await recordHistory(file, workspaceId, small, SMALL);
  return { key, big, small };
};

/** One delivery the bench receiver got: when, and how long after its event's commit (the body's `timestamp`). */
export interface Arrival {
  readonly at: number;
  readonly lagMs: number;
}

export interface BenchReceiver {
  readonly url: string;
  /** Every delivery received so far, in order. */
  readonly arrivals: readonly Arrival[];
  close(): void;
}

/** A receiver that answers every delivery 200 and notes how late it came. */
const startBenchReceiver = async (): Promise<BenchReceiver> => {
  const arrivals: Arrival[] = [];
  const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = Date.now();
      const timestamp = (JSON.parse(Buffer.concat(chunks).toString()) as { timestamp: string }).timestamp;
      arrivals.push({ at, lagMs: at - Date.parse(timestamp) });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`, arrivals, close: () => receiver.close() };
};

export interface ReplayStartFigures {
  /** From the request to `completed`, of a replay that matches no event: the driver's start alone. */
  readonly bigMs: number;
  readonly smallMs: number;
  /** Commit → receipt of the live deliveries before the replays, and from the big one's request until a second after it completed. */
  readonly liveAlone: ReturnType<typeof quantiles>;
  readonly liveDuring: ReturnType<typeof quantiles>;
}

/**
 * What starting a replay costs at this history: the small subscription (the ceiling) and then the
 * big one each replay a range that holds no event (so the time to `completed` is the driver's start),
 * while tickets are written at WRITES_PER_S; the live deliveries' lag before and meanwhile says
 * whether the start held up the dispatcher.
 */
export const measureReplayStart = async (target: { readonly url: string; readonly key: string; readonly big: string; readonly small: string }, receiver: BenchReceiver): Promise<ReplayStartFigures> => {
  const { url, key } = target;
  const writer = ticketWriter(url, key, 'r');
  const lags = (from: number, to: number) => quantiles(receiver.arrivals.filter(({ at }) => at >= from && at < to).map(({ lagMs }) => lagMs));
  /** ms from the request until the replay is completed (polled every 10 ms). */
  const replay = async (subscription: string): Promise<number> => {
    const began = performance.now();
    const id = String((await must(url, 'POST', `/api/v1/webhooks/${subscription}/replay`, key, { since: 1, until: 1 }))['id']);
    while ((await must(url, 'GET', `/api/v1/webhooks/${subscription}/replays/${id}`, key))['status'] === 'running') await sleep(10);
    return Math.round(performance.now() - began);
  };
  try {
    const aloneFrom = Date.now();
    await sleep(5_000);
    const liveAlone = lags(aloneFrom, Date.now());
    const smallMs = await replay(target.small);
    const duringFrom = Date.now();
    const bigMs = await replay(target.big);
    await sleep(1_000);
    return { bigMs, smallMs, liveAlone, liveDuring: lags(duringFrom, Date.now()) };
  } finally {
    await writer.stop();
  }
};

export const reportReplayStart = (figures: ReplayStartFigures): void => {
  console.error(`a replay's start: ${figures.bigMs} ms on the big subscription, ${figures.smallMs} ms on the small one (the ceiling)`);
  console.error(
    `live deliveries, commit → receipt: p99 ${figures.liveDuring.p99} ms, max ${figures.liveDuring.max} ms while it started (${figures.liveDuring.n}), p99 ${figures.liveAlone.p99} ms, max ${figures.liveAlone.max} ms before (${figures.liveAlone.n})`,
  );
};

/** The figures of measureReplayStart in the benchmark's JSON line. */
export const replayStartFields = (figures: ReplayStartFigures) => ({
  replay_start_ms: figures.bigMs,
  replay_start_small_ms: figures.smallMs,
  live_during_replay_start_p99_ms: figures.liveDuring.p99,
  live_during_replay_start_max_ms: figures.liveDuring.max,
  live_alone_p99_ms: figures.liveAlone.p99,
  live_alone_max_ms: figures.liveAlone.max,
});

export interface BenchCluster {
  readonly dataDir: string;
  readonly receiver: BenchReceiver;
  readonly group: ProcessGroup;
}

/**
 * Runs `bench` with a fresh data folder, a receiver and a process group whose services share `env`;
 * on a failure shows what the services wrote; always stops them and removes the folder.
 */
export const inBenchCluster = async <R>(env: Record<string, string>, bench: (cluster: BenchCluster) => Promise<R>): Promise<R> => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-deliveries-history-'));
  const receiver = await startBenchReceiver();
  const group = createProcessGroup({
    DATA_DIR: dataDir,
    ADMIN_TOKEN: ADMIN,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    RATE_LIMIT_PER_KEY: '1000000000',
    RATE_LIMIT_PER_IP: '1000000000',
    PLANS: 'bench:100000000:true',
    ...env,
  });
  console.error(`load average before: ${loadavg()[0]?.toFixed(2)}`);
  try {
    return await bench({ dataDir, receiver, group });
  } catch (error) {
    console.error(group.outputs());
    throw error;
  } finally {
    await group.stopAll();
    receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};

/** Milliseconds from spawning a role until it answers /readyz. */
export const timedStart = async <P>(start: () => Promise<P>): Promise<{ service: P; ms: number }> => {
  const began = performance.now();
  const service = await start();
  return { service, ms: Math.round(performance.now() - began) };
};

export const run = async ({ long }: { long: boolean }) => {
  if (process.env['BENCH_ROLE'] === 'api') return (await import('./deliveries-history-distributed.js')).runDistributed({ long });
  const deliveries = Number(process.env['BENCH_DELIVERIES'] ?? 1_000_000);
  const seconds = Number(process.env['BENCH_SECONDS'] ?? (long ? 120 : 30));
  return inBenchCluster({ ROLE: 'all' }, async ({ dataDir, receiver, group }) => {
    const { key, big, small } = await prepareHistory(() => group.start('prepare', {}), dataDir, receiver.url, deliveries);
    const build = await timedStart(() => group.start('first start (builds the index)', {}));
    console.error(`first start, the index built from the log: ${build.ms} ms`);
    build.service.kill('SIGTERM');
    await build.service.exited;
    const resume = await timedStart(() => group.start('second start (resumes the index)', {}));
    console.error(`second start, the index resumed from its checkpoint: ${resume.ms} ms`);

    const figures = await measurePages({ url: resume.service.url, key, big, small, seconds }, async (oldest, newest) => quantiles(bareSelects(dataDir, big, oldest, newest, 5_000)));
    report(deliveries, figures, figures.ceiling, 'the bare indexed select on the index file');
    const replayStart = await measureReplayStart({ url: resume.service.url, key, big, small }, receiver);
    reportReplayStart(replayStart);
    return {
      bench: 'deliveries-history',
      deliveries,
      filled: 'log (packed delivery records), indexed by the service',
      seconds,
      startup_build_index_ms: build.ms,
      startup_resume_index_ms: resume.ms,
      ...pageFields(figures),
      ceiling_select_p50_ms: figures.ceiling.p50,
      ceiling_select_p99_ms: figures.ceiling.p99,
      ...replayStartFields(replayStart),
    };
  });
};
