// API benchmark: the real service on a temp folder, loaded by autocannon at 64 connections in a
// worker thread: POST /api/v1/tickets, the same with an Idempotency-Key of its own per request (as
// careful integrators send it: its claim and answer are commits too), the plain POST again with a new
// connection for every request (clients without keep-alive), then GET /api/v1/tickets/{id},
// first embedded (SQLite log,
// in-process everything), then as an API server of the distributed mode (ROLE=api: read models in a
// Redis the bench starts), with a bare koa handler on the same machine as the ceiling, before and after.
// `npm run bench -- api [--long]`: about 10 s per phase (30 s with --long), each measured after 2 s of
// the same load on the same connections (load-worker.ts: a new connection's first second is the
// server's accept queue and cold code, and is reported apart as the warm-up p99). The machine's 1-minute
// load average is printed before and after: figures from a loaded machine are not comparable. Each
// phase also reports the CPU time of the thread that serves the requests (this process's main thread,
// the load generator runs in a worker) per request answered: steadier than a rate on a shared machine,
// and its ratio to the bare koa handler's is the cost of a request against the ceiling's.
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import Koa from 'koa';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service.js';
import { engine as engines } from './engines.js';
import { schedstat } from './stall-watch.js';
import type { LoadOptions, LoadReport } from './load-worker.js';
import { startWorker } from '../../src/shared/worker.js';

const CONNECTIONS = 64;
/** Seconds of load before each phase's measured ones, on the same connections (load-worker.ts says why). */
const WARMUP_S = 2;
const ADMIN = 'bench-admin';
// BENCH_REDIS_PORT: another port when helpers share the machine and may run this bench at once.
const REDIS_PORT = Number(process.env['BENCH_REDIS_PORT'] ?? 6394);
const engine = engines({ redis: REDIS_PORT, kafka: 0 });

interface Phase {
  readonly rps: number;
  readonly p99: number;
  /** p99 of the warm-up: new connections and code not yet optimized. */
  readonly warmupP99: number;
  readonly errors: number;
  /** CPU µs of the request thread per request answered. */
  readonly cpuUs: number;
}

/** ns this process's main thread has run so far (NaN where /proc has no schedstat). */
const mainThreadRunNs = (): number => schedstat(process.pid)?.run ?? NaN;

/** Runs the load worker on `options` after WARMUP_S of warm-up on the same connections; the CPU is counted over the measured seconds only. */
const load = async (label: string, options: Omit<LoadOptions, 'connections' | 'warmupSeconds'>): Promise<Phase> => {
  const worker = startWorker(new URL('./load-worker.ts', import.meta.url), { workerData: { connections: CONNECTIONS, warmupSeconds: WARMUP_S, ...options }, name: 'bench-load' });
  let ranBefore = NaN;
  const report = await new Promise<Extract<LoadReport, { kind: 'done' }>>((resolve, reject) => {
    worker.on('message', (message: LoadReport) => {
      if (message.kind === 'measuring') ranBefore = mainThreadRunNs();
      else resolve(message);
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the load worker exited (${code}) before its figures`)));
  });
  await worker.terminate();
  const cpuUs = Math.round((mainThreadRunNs() - ranBefore) / 1000 / report.requests);
  const phase = { rps: report.rps, p99: report.p99, warmupP99: report.warmupP99, errors: report.errors, cpuUs };
  console.log(
    `${label.padEnd(36)} ${String(phase.rps).padStart(7)} req/s   p99 ${String(phase.p99).padStart(5)} ms (warm-up ${String(phase.warmupP99).padStart(6)})   ${String(cpuUs).padStart(5)} CPU µs/request   non-2xx/errors ${phase.errors}`,
  );
  return phase;
};

/** The most a koa handler can answer here: no auth, no log, a constant JSON body. */
const ceiling = async (duration: number, when: string): Promise<Phase> => {
  const app = new Koa();
  app.use((ctx) => {
    ctx.body = { ok: true };
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    return await load(`bare koa (ceiling, ${when})`, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, seconds: duration });
  } finally {
    server.closeAllConnections();
    server.close();
  }
};

interface Measured {
  readonly post: Phase;
  readonly postWithKey: Phase;
  /** The plain POST, each request on a connection of its own. */
  readonly postConnectionEach: Phase;
  readonly get: Phase;
}

/** POST, POST with Idempotency-Key, POST a connection each, then GET against one started service; the GET reads the first ticket. */
const measure = async (label: string, env: Record<string, string>, duration: number): Promise<Measured> => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-api-'));
  const service = await startService(
    loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      ADMIN_TOKEN: ADMIN,
      RATE_LIMIT_PER_KEY: '1000000000',
      RATE_LIMIT_PER_IP: '1000000000',
      // The monthly ticket quota would stop a long run.
      PLANS: 'free:100:false,team:5000:true,business:100000000:true',
      ...env,
    }),
  );
  try {
    const post = (p: string, token: string, body: unknown) =>
      fetch(`${service.url}${p}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) }).then(
        async (r) => ({ status: r.status, body: (await r.json()) as Record<string, string> }),
      );
    const workspace = await post('/admin/v1/workspaces', ADMIN, { name: 'bench', plan: 'business' });
    const apiKey = String(workspace.body['api_key']);
    const ticketBody = { contact: { email: 'bench@example.com' }, subject: 'Damaged order', message: 'My order arrived damaged.' };
    const first = await post('/api/v1/tickets', apiKey, ticketBody);
    if (first.status !== 201) throw new Error(`ticket creation failed: ${first.status} ${JSON.stringify(first.body)}`);
    const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
    const posting = { url: `${service.url}/api/v1/tickets`, method: 'POST', body: JSON.stringify(ticketBody), seconds: duration } as const;
    return {
      post: await load(`POST /api/v1/tickets${label}`, { ...posting, headers }),
      // autocannon puts a fresh id in place of [<id>] in each request.
      postWithKey: await load(`POST /api/v1/tickets + key${label}`, { ...posting, headers: { ...headers, 'idempotency-key': 'bench-[<id>]' }, idReplacement: true }),
      postConnectionEach: await load(`POST /api/v1/tickets, new conn.${label}`, { ...posting, headers, connectionPerRequest: true }),
      get: await load(`GET /api/v1/tickets/{id}${label}`, { url: `${service.url}/api/v1/tickets/${first.body['id']}`, headers, seconds: duration }),
    };
  } finally {
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const duration = opts.long ? 30 : 10;
  const loadBefore = loadavg()[0] ?? 0;
  console.log(`api bench: ${CONNECTIONS} connections, ${duration} s per phase, load average ${loadBefore.toFixed(2)}`);
  // The ceiling before and after the service's phases, the ratios against their mean: measured once,
  // at the end, it ranged from 6,666 to 14,394 req/s between runs on this machine.
  const bareBefore = await ceiling(duration, 'before');
  const embedded = await measure('', {}, duration);
  // An API server of the distributed mode: read models in Redis (the log is SQLite in shared mode here).
  await engine('redis', 'start');
  let distributed: Measured;
  try {
    distributed = await measure(' (ROLE=api)', { ROLE: 'api', REDIS_URL: `redis://127.0.0.1:${REDIS_PORT}` }, duration);
  } finally {
    await engine('redis', 'stop');
  }
  const bareAfter = await ceiling(duration, 'after');
  const bare = { rps: Math.round((bareBefore.rps + bareAfter.rps) / 2), cpuUs: (bareBefore.cpuUs + bareAfter.cpuUs) / 2 };
  const loadAfter = loadavg()[0] ?? 0;
  console.log(`bare koa: ${bare.rps} req/s, the mean of before and after`);
  console.log(`POST /api/v1/tickets: ${(embedded.post.rps / bare.rps).toFixed(2)} of bare koa (${(distributed.post.rps / bare.rps).toFixed(2)} as ROLE=api)`);
  console.log(`POST /api/v1/tickets on a new connection each: ${(embedded.postConnectionEach.rps / embedded.post.rps).toFixed(2)} of the kept-alive rate (${(distributed.postConnectionEach.rps / distributed.post.rps).toFixed(2)} as ROLE=api)`);
  console.log(`POST /api/v1/tickets with Idempotency-Key: ${(embedded.postWithKey.rps / bare.rps).toFixed(2)} of bare koa (${(distributed.postWithKey.rps / bare.rps).toFixed(2)} as ROLE=api)`);
  console.log(`by the request thread's CPU per request: POST /api/v1/tickets ${(bare.cpuUs / embedded.post.cpuUs).toFixed(2)} of bare koa (${(bare.cpuUs / distributed.post.cpuUs).toFixed(2)} as ROLE=api), GET ${(bare.cpuUs / embedded.get.cpuUs).toFixed(2)}`);
  console.log(`load average after: ${loadAfter.toFixed(2)}`);
  return {
    bench: 'api',
    post_rps: embedded.post.rps,
    post_p99_ms: embedded.post.p99,
    post_warmup_p99_ms: embedded.post.warmupP99,
    post_with_key_rps: embedded.postWithKey.rps,
    post_with_key_p99_ms: embedded.postWithKey.p99,
    post_connection_each_rps: embedded.postConnectionEach.rps,
    post_connection_each_p99_ms: embedded.postConnectionEach.p99,
    get_rps: embedded.get.rps,
    get_p99_ms: embedded.get.p99,
    api_role_post_rps: distributed.post.rps,
    api_role_post_p99_ms: distributed.post.p99,
    api_role_post_warmup_p99_ms: distributed.post.warmupP99,
    api_role_post_with_key_rps: distributed.postWithKey.rps,
    api_role_post_with_key_p99_ms: distributed.postWithKey.p99,
    api_role_post_connection_each_rps: distributed.postConnectionEach.rps,
    api_role_post_connection_each_p99_ms: distributed.postConnectionEach.p99,
    api_role_get_rps: distributed.get.rps,
    api_role_get_p99_ms: distributed.get.p99,
    post_cpu_us_per_request: embedded.post.cpuUs,
    post_with_key_cpu_us_per_request: embedded.postWithKey.cpuUs,
    post_connection_each_cpu_us_per_request: embedded.postConnectionEach.cpuUs,
    get_cpu_us_per_request: embedded.get.cpuUs,
    api_role_post_cpu_us_per_request: distributed.post.cpuUs,
    ceiling_cpu_us_per_request: Math.round(bare.cpuUs),
    post_cpu_ratio: Number((bare.cpuUs / embedded.post.cpuUs).toFixed(2)),
    ceiling_rps: bare.rps,
    ceiling_before_rps: bareBefore.rps,
    ceiling_after_rps: bareAfter.rps,
    post_ratio: Number((embedded.post.rps / bare.rps).toFixed(2)),
    api_role_post_ratio: Number((distributed.post.rps / bare.rps).toFixed(2)),
    post_with_key_ratio: Number((embedded.postWithKey.rps / bare.rps).toFixed(2)),
    load_before: Number(loadBefore.toFixed(2)),
    load_after: Number(loadAfter.toFixed(2)),
  };
}
