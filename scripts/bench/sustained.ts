// Sustained load on the embedded default, as an integrator's traffic is: the real service in its own
// process (`node --import tsx src/main.ts`, ROLE=all) on a fresh data folder, 10 webhook subscriptions
// on a receiver in another process, 4 long pollers, and writes (new tickets and messages) at a set
// rate for a set time. First the ceiling: the most writes/s the service acknowledges from 64
// concurrent clients (5 s), a burst at the maximum write rate whose commit → first attempt lag and
// delivery rate are reported too. Then writes at half of it (or BENCH_RATE) for BENCH_SECONDS (60; --long:
// 600). Reported: commit → first attempt received p50/p99 per minute and over the run, how late the
// retries of the receiver's deliberate 500s came after their due time, false timeouts (a retry of an
// attempt the receiver had answered 200), the deliveries still owed when writes stop, API p99 during
// the run (also per minute), and the start-up time of the resulting log (under tsx, and of a
// compiled build the bench makes first). Beside the receiver's figures, the engine's own
// (its punctuality histograms at /admin/v1/metrics): commit → fan-out, fan-out → first attempt out,
// and due → retry out, without the network and the receiver's event loop. And the writes the API held
// for delivery (backpressure: README, WEBHOOK_BACKPRESSURE_LATE_MS) in the burst and in the run, and
// through the burst and its drain how busy the host's cores were and each process's CPU seconds (the
// service's, Kafka's and Redis', the bench's and the receiver's): a burst on a host with no core to
// spare shows it there.
// With BENCH_ROLES=distributed the same traffic goes to the distributed roles on one host instead: an
// API server, the relay and two dispatchers on one shared SQLite log, with Kafka and Redis the bench
// starts on ports of its own, each role from the compiled build the bench makes first, as the
// Dockerfile runs it; the start-up reported is then the API server's and a dispatcher's. The API
// server runs at API_THREAD_NICE 19 there, as docker-compose.yml runs it beside the other roles.
// With BENCH_WORKSPACES=N (1 by default) the traffic is spread over N workspaces, each with its own 10
// subscriptions on the same receiver and a share of the tickets; the writes go to them in turn, so a
// write still owes 10 deliveries. The log, Kafka (a partition per workspace key) and the engines then
// carry several tenants at once, as a real installation does.
// `npm run bench -- sustained [--long]`, BENCH_SECONDS / BENCH_RATE / BENCH_ROLES / BENCH_WORKSPACES
// to override; API_THREAD_NICE goes to the service (or the API server) as it is.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Agent, request } from 'undici';
import type { HeldWrites } from '../../src/http/middleware/write-hold.js';
import { heldWritesIn } from '../../test/support/held-writes.js';
import { buildCompiled, clusterEnv, createProcessGroup, type ProcessGroup, type RoleProcess } from '../../test/support/processes.js';
import { send } from '../torture/http.js';
import { engine as engineAt, enginePid } from './engines.js';
import { metricsText, punctual, scrapePunctuality, since, type Tally } from './engine-punctuality.js';
import { hostCpu, processesCpu, watchStalls } from './stall-watch.js';
import { startSustainedReceiver, type ReceiverFigures, type SustainedReceiver } from './sustained-receiver.js';

const ADMIN = 'bench-admin';
const SUBSCRIPTIONS = 10;
const LONG_POLLERS = 4;
const CEILING_CLIENTS = 64;
const CEILING_SECONDS = 5;
const RETRY_DELAY_MS = 1000;
const TICKETS = 200;
const TICK_MS = 10;
const DRAIN_SECONDS = 120;
const REDIS_PORT = 6396;
const KAFKA_PORT = 19396;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** CPU seconds by name: for the minute's line, and for a JSON field (one word a minute). */
const cpuText = (cpu: Readonly<Record<string, number>> | undefined) => Object.entries(cpu ?? {}).map(([name, s]) => `${name} ${s}`).join(', ');
const cpuField = (cpu: Readonly<Record<string, number>>) => Object.entries(cpu).map(([name, s]) => `${name.replaceAll(' ', '_')}=${s}`).join(',');
const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const round = (n: number) => Math.round(n * 10) / 10;
const quantiles = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)), max: round(sorted.at(-1) ?? NaN), n: sorted.length };
};

interface Workspace {
  readonly apiKey: string;
  readonly tickets: string[];
}

const must = async (url: string, method: string, p: string, token: string, body?: unknown) => {
  const sent = await send(url, { method, path: p, token, ...(body === undefined ? {} : { body }) });
  if (sent.kind !== 'answer' || sent.answer.status >= 300) throw new Error(`${method} ${p}: ${JSON.stringify(sent)}`);
  return sent.answer.body as Record<string, unknown>;
};

/** The workspaces the traffic goes to: each with SUBSCRIPTIONS subscriptions and its share of TICKETS. */
type Tenants = readonly Workspace[];

const setUp = async (url: string, receiverUrl: string, count: number): Promise<Tenants> => {
  const tenants: Workspace[] = [];
  for (let w = 0; w < count; w++) {
    const created = await must(url, 'POST', '/admin/v1/workspaces', ADMIN, { name: `sustained-${w}`, plan: 'business' });
    const apiKey = String(created['api_key']);
    for (let i = 0; i < SUBSCRIPTIONS; i++) await must(url, 'POST', '/api/v1/webhooks', apiKey, { url: receiverUrl });
    const tickets: string[] = [];
    for (let i = w; i < TICKETS; i += count) tickets.push(String((await must(url, 'POST', '/api/v1/tickets', apiKey, newTicket(i)))['id']));
    tenants.push({ apiKey, tickets });
  }
  return tenants;
};

/** The API's writes held for webhook delivery so far (backpressure; 0 where it holds none). */
const heldWrites = async (url: string): Promise<HeldWrites> => heldWritesIn(await metricsText(url, ADMIN));
const heldSince = (before: HeldWrites, after: HeldWrites) => ({
  requests: after.requests - before.requests,
  seconds: round(after.seconds - before.seconds),
});

const newTicket = (n: number) => ({ contact: { email: `sustained-${n}@example.com` }, subject: `Order ${n}`, message: 'Where is my order?' });

// The writers' own client: undici's request on kept-alive connections. The service shares this
// host's two cores with its clients, and fetch (with a timeout signal per request) took seven to nine
// times the client's CPU a request (about 630 µs against 80, against a bare server): the write ceiling
// was partly the client's.
const writers = new Agent({ connections: CEILING_CLIENTS, headersTimeout: 30_000, bodyTimeout: 30_000 });

/** Write `n`, to the workspaces in turn: a message on a known ticket, or (one in ten) a new ticket. Resolves with its latency, or null when it failed. */
const write = async (url: string, tenants: Tenants, n: number): Promise<number | null> => {
  const started = performance.now();
  const ws = tenants[n % tenants.length] as Workspace;
  // The workspace's own count of writes: one in ten of each workspace's is a new ticket.
  const turn = Math.floor(n / tenants.length);
  const [p, body] = turn % 10 === 0 ? ['/api/v1/tickets', newTicket(TICKETS + n)] : [`/api/v1/tickets/${ws.tickets[turn % ws.tickets.length]}/messages`, { content: `message ${n}` }];
  try {
    const answer = await request(`${url}${p}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ws.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      dispatcher: writers,
    });
    await answer.body.dump();
    return answer.statusCode < 300 ? performance.now() - started : null;
  } catch {
    return null;
  }
};

/** The most acknowledged writes/s from CEILING_CLIENTS clients writing back to back. */
const ceiling = async (url: string, tenants: Tenants): Promise<number> => {
  let done = 0;
  let n = 0;
  const until = performance.now() + CEILING_SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CEILING_CLIENTS }, async () => {
      while (performance.now() < until) if ((await write(url, tenants, ++n)) !== null) done++;
    }),
  );
  return done / CEILING_SECONDS;
};

/** Long polls `/updates` until `stop()`; counts the items it was handed. */
const longPoll = async (url: string, ws: Workspace, running: () => boolean): Promise<number> => {
  let items = 0;
  let offset = Math.floor(Date.now() * 1000);
  while (running()) {
    const sent = await send(url, { method: 'GET', path: `/api/v1/updates?offset=${offset}&timeout=5&limit=100`, token: ws.apiKey, timeoutMs: 30_000 });
    if (sent.kind !== 'answer' || sent.answer.status !== 200) continue;
    const body = sent.answer.body as { items: unknown[]; next_offset: number };
    items += body.items.length;
    offset = body.next_offset;
  }
  return items;
};

/** The workspace's public events from `fromMs` on, as /updates serves them. */
const eventsOf = async (url: string, ws: Workspace, fromMs: number): Promise<number> => {
  let count = 0;
  for (let offset = Math.floor(fromMs * 1000); ; ) {
    const body = await must(url, 'GET', `/api/v1/updates?offset=${offset}&timeout=0&limit=1000`, ws.apiKey);
    const items = body['items'] as unknown[];
    count += items.length;
    if (items.length < 1000) return count;
    offset = Number(body['next_offset']);
  }
};

/** The public events of every workspace from `fromMs` on. */
const eventsSince = async (url: string, tenants: Tenants, fromMs: number): Promise<number> => {
  let count = 0;
  for (const ws of tenants) count += await eventsOf(url, ws, fromMs);
  return count;
};

/** Waits (at most DRAIN_SECONDS) until every delivery of the events committed since `fromMs` has had its first attempt. */
const drain = async (url: string, tenants: Tenants, receiver: SustainedReceiver, fromMs: number): Promise<ReceiverFigures> => {
  const owed = (await eventsSince(url, tenants, fromMs)) * SUBSCRIPTIONS;
  // A count while deliveries come in: the whole figures, serialized, would hold the receiver (and the
  // deliveries still going out) for as long, and are read once at the end.
  for (let waited = 0; waited < DRAIN_SECONDS && (await receiver.received(fromMs)) < owed; waited++) await sleep(1000);
  return receiver.figures();
};

/**
 * The engine's figures over a stretch: commit → fan-out and fan-out → first attempt out (each share
 * within 200 ms, the issue's first-attempt bound), due → retry out (share within 100 ms).
 */
const engineFigures = (tally: Tally) => {
  const fanOut = punctual(tally, 'webhook_fanout_delay_seconds', null, 0.2);
  const first = punctual(tally, 'webhook_attempt_start_delay_seconds', 'attempt="first"', 0.2);
  const retry = punctual(tally, 'webhook_attempt_start_delay_seconds', 'attempt="retry"', 0.1);
  const pct = (share: number) => `${(share * 100).toFixed(2)}%`;
  return {
    fanOut,
    first,
    retry,
    line:
      `fan-out p50 ≤ ${fanOut.p50AtMostMs} ms, p99 ≤ ${fanOut.p99AtMostMs} ms (${pct(fanOut.within)} within 200 ms, ${fanOut.count} events); ` +
      `first attempt out p50 ≤ ${first.p50AtMostMs} ms, p99 ≤ ${first.p99AtMostMs} ms after its fan-out (${pct(first.within)} within 200 ms); ` +
      `retries out p50 ≤ ${retry.p50AtMostMs} ms, p99 ≤ ${retry.p99AtMostMs} ms after due (${pct(retry.within)} within 100 ms, ${retry.count} retries)`,
  };
};

/** The processes serving the traffic, and how to time a restart of what serves it. */
interface Topology {
  /** Where the writes, polls and set-up go. */
  readonly url: string;
  /** The process serving `url`. */
  apiPid(): number | undefined;
  /** Every process serving the traffic (the service's, and the engines'), by label. */
  pids(): Record<string, number>;
  /** The processes running a delivery engine, whose /admin/v1/metrics hold its punctuality. */
  engineUrls(): readonly string[];
  /**
   * Stops the service's processes and starts them again on the same log, under tsx (as `npm start`)
   * and then from the compiled build (`compiled`, its main module, as the Dockerfile runs it);
   * resolves with ms per restarted role and way.
   */
  restart(compiled: string): Promise<Record<string, number>>;
  stop(): Promise<void>;
}

/** ms from spawning `name` (from the compiled build when given its main module) until its /readyz answers. */
const timedStart = async (group: ProcessGroup, name: string, env: Record<string, string>, compiled?: string): Promise<{ process: RoleProcess; ms: number }> => {
  const began = performance.now();
  const started = await group.start(name, env, compiled === undefined ? {} : { compiled });
  return { process: started, ms: Math.round(performance.now() - began) };
};

/** Stops `role`, times its start on the same log under tsx, stops it again and times a start of the compiled build, which keeps running. */
const restartBothWays = async (group: ProcessGroup, role: RoleProcess, name: string, env: Record<string, string>, compiled: string) => {
  await stopped(role);
  const sources = await timedStart(group, `${name}-restarted`, env);
  await stopped(sources.process);
  const built = await timedStart(group, `${name}-restarted-compiled`, env, compiled);
  return { process: built.process, ms: sources.ms, compiledMs: built.ms };
};

const stopped = async (role: RoleProcess): Promise<void> => {
  role.kill('SIGTERM');
  await role.exited;
};

/** The labelled pids that are known. */
const pidsOf = (pids: Record<string, number | undefined>): Record<string, number> =>
  Object.fromEntries(Object.entries(pids).filter((entry): entry is [string, number] => entry[1] !== undefined));

/** The embedded default: one process. */
const embedded = async (group: ProcessGroup): Promise<Topology> => {
  let service = await group.start('service', {});
  return {
    url: service.url,
    apiPid: () => service.child.pid,
    pids: () => pidsOf({ service: service.child.pid }),
    engineUrls: () => [service.url],
    async restart(compiled) {
      const again = await restartBothWays(group, service, 'service', {}, compiled);
      service = again.process;
      return { startup_ms: again.ms, startup_compiled_ms: again.compiledMs };
    },
    stop: () => group.stopAll(),
  };
};

/**
 * The distributed roles on one host: relay, two dispatchers and an API server, on Kafka and Redis of
 * the bench's own, each from the compiled build (`compiled`, its main module), as the Dockerfile that
 * docker-compose.yml runs them from has it: under tsx, two bursts of three were over 200 ms p99
 * against none of three compiled, in alternating runs (RELIABILITY.md, "Distributed roles from the build").
 */
const distributed = async (group: ProcessGroup, compiled: string): Promise<Topology> => {
  const engine = engineAt({ redis: REDIS_PORT, kafka: KAFKA_PORT });
  await engine('redis', 'start');
  await engine('kafka', 'start');
  const stopEngines = async () => {
    await engine('kafka', 'stop');
    await engine('redis', 'stop');
  };
  try {
    const cluster = clusterEnv('sustained', `redis://127.0.0.1:${REDIS_PORT}`, `127.0.0.1:${KAFKA_PORT}`);
    // Every role shares this host: the API server yields to the others, as docker-compose.yml has it.
    const apiEnv = { ...cluster, ROLE: 'api', API_THREAD_NICE: process.env['API_THREAD_NICE'] ?? '19' };
    const start = (name: string, role: string) => group.start(name, { ...cluster, ROLE: role }, { compiled });
    const relay = await start('relay', 'relay');
    let dispatchers = await Promise.all([start('dispatcher-1', 'dispatcher'), start('dispatcher-2', 'dispatcher')]);
    let api = await group.start('api', apiEnv, { compiled });
    return {
      url: api.url,
      apiPid: () => api.child.pid,
      pids: () =>
        pidsOf({
          api: api.child.pid,
          relay: relay.child.pid,
          ...Object.fromEntries(dispatchers.map((d, i) => [`dispatcher ${i + 1}`, d.child.pid])),
          kafka: enginePid('kafka', KAFKA_PORT),
          redis: enginePid('redis', REDIS_PORT),
        }),
      engineUrls: () => dispatchers.map((d) => d.url),
      async restart(compiled) {
        const apiAgain = await restartBothWays(group, api, 'api', apiEnv, compiled);
        api = apiAgain.process;
        const dispatcherAgain = await restartBothWays(group, dispatchers[0] as RoleProcess, 'dispatcher', { ...cluster, ROLE: 'dispatcher' }, compiled);
        dispatchers = [dispatcherAgain.process, dispatchers[1] as RoleProcess];
        return {
          startup_ms: apiAgain.ms,
          startup_compiled_ms: apiAgain.compiledMs,
          dispatcher_startup_ms: dispatcherAgain.ms,
          dispatcher_startup_compiled_ms: dispatcherAgain.compiledMs,
        };
      },
      async stop() {
        await group.stopAll();
        await stopEngines();
      },
    };
  } catch (error) {
    await group.stopAll();
    await stopEngines();
    throw error;
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const seconds = Number(process.env['BENCH_SECONDS'] ?? (opts.long ? 600 : 60));
  const roles = process.env['BENCH_ROLES'] ?? 'embedded';
  const workspaces = Number(process.env['BENCH_WORKSPACES'] ?? 1);
  // Each workspace needs a ticket of its own to write messages on.
  if (!Number.isInteger(workspaces) || workspaces < 1 || workspaces > TICKETS) throw new Error(`BENCH_WORKSPACES=${process.env['BENCH_WORKSPACES']}: a whole number from 1 to ${TICKETS}`);
  if (roles !== 'embedded' && roles !== 'distributed') throw new Error(`BENCH_ROLES=${roles}: embedded or distributed`);
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-sustained-'));
  /** The compiled build the restart is timed from too: made first for the distributed roles, which run from it, else once the run is over. */
  let build: Awaited<ReturnType<typeof buildCompiled>> | null = null;
  const receiver = await startSustainedReceiver(RETRY_DELAY_MS);
  const group = createProcessGroup({
    ROLE: 'all',
    DATA_DIR: dataDir,
    ADMIN_TOKEN: ADMIN,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    WEBHOOK_RETRY_DELAYS: Array(5).fill(`${RETRY_DELAY_MS}ms`).join(','),
    WEBHOOK_TIMEOUT_MS: '2000',
    RATE_LIMIT_PER_KEY: '1000000000',
    RATE_LIMIT_PER_IP: '1000000000',
    // Passed to the service as they are (README): the embedded request thread's priority, to compare
    // with the delivery thread's; when writes are held for delivery that is behind and busy, in either
    // mode (0 to compare without), and the longest one write is held.
    ...Object.fromEntries(
      ['API_THREAD_NICE', 'WEBHOOK_BACKPRESSURE_LATE_MS', 'WEBHOOK_BACKPRESSURE_MAX_HOLD_MS'].flatMap((name) =>
        process.env[name] === undefined ? [] : [[name, process.env[name] as string]],
      ),
    ),
  });
  // Set before the try: the finally stops it.
  let topology: Topology | null = null;
  try {
    if (roles === 'distributed') {
      console.error('building the service (npm run build): the distributed roles run from the build');
      build = await buildCompiled('bench-build-');
      topology = await distributed(group, build.main);
    } else topology = await embedded(group);
    const { url } = topology;
    const tenants = await setUp(url, receiver.url, workspaces);
    const engines = async () => scrapePunctuality(topology!.engineUrls(), ADMIN);
    const beforeBurst = await engines();
    const heldBeforeBurst = await heldWrites(url);
    // Who took the host's CPU through the burst and its drain: a host with no core to spare shows it here.
    const burstPids = { ...topology.pids(), bench: process.pid, ...(receiver.pid === undefined ? {} : { receiver: receiver.pid }) };
    const [cpuBeforeBurst, hostBeforeBurst] = [processesCpu(burstPids), hostCpu()];
    const burstStartedMs = Date.now();
    const ceilingPerS = await ceiling(url, tenants);
    const burstStoppedMs = Date.now();
    const rate = Number(process.env['BENCH_RATE'] ?? Math.max(1, Math.floor(ceilingPerS / 2)));
    console.error(`ceiling ${Math.round(ceilingPerS)} writes/s; sustaining ${rate} writes/s for ${seconds} s`);
    // The set-up's and the ceiling's deliveries arrive before the measured run starts. The ceiling is
    // also the burst at the maximum write rate: its deliveries' lag is reported on its own.
    const afterBurst = await drain(url, tenants, receiver, 0);
    const [cpuAfterBurst, hostAfterBurst] = [processesCpu(burstPids), hostCpu()];
    const inBurst = afterBurst.firstAttempts.filter(([committed]) => committed >= burstStartedMs && committed < burstStoppedMs);
    const burst = quantiles(inBurst.map(([committed, arrived]) => arrived - committed));
    const burstSpanS = inBurst.length === 0 ? 1 : (Math.max(...inBurst.map(([, arrived]) => arrived)) - burstStartedMs) / 1000;
    console.error(`burst: commit → first attempt p50 ${burst.p50} ms, p99 ${burst.p99} ms (${burst.n} deliveries, ${Math.round(burst.n / burstSpanS)}/s)`);
    // Per second of commits: whether the lag grew through the burst, or one second (the first, cold) made the p99.
    const secondOf = (ms: number): number => Math.floor((ms - burstStartedMs) / 1000);
    const burstBySecond = Array.from({ length: CEILING_SECONDS }, (_, i) =>
      quantiles(inBurst.filter(([committed]) => secondOf(committed) === i).map(([committed, arrived]) => arrived - committed)),
    );
    console.error(`burst by second of commit: p50 / p99 ${burstBySecond.map((q) => `${q.p50} / ${q.p99}`).join(', ')} ms`);
    // Connections the engines opened to the receiver, by second of the burst (and before it: the set-up's).
    const connectionsBySecond = Array.from({ length: CEILING_SECONDS }, (_, i) => afterBurst.connectionsAt.filter((at) => secondOf(at) === i).length);
    const connectionsBefore = afterBurst.connectionsAt.filter((at) => at < burstStartedMs).length;
    console.error(`burst: receiver connections opened by second ${connectionsBySecond.join(', ')} (${connectionsBefore} accepted before it)`);
    const burstCpu = Object.fromEntries(
      Object.entries(cpuAfterBurst)
        .map(([label, cpuS]) => [label, round(cpuS - (cpuBeforeBurst[label] ?? cpuS))] as const)
        .sort((a, b) => b[1] - a[1]),
    );
    const hostBusyShare = Math.round((100 * (hostAfterBurst.busyS - hostBeforeBurst.busyS)) / (hostAfterBurst.totalS - hostBeforeBurst.totalS)) / 100;
    console.error(`burst and its drain: the host's cores ${Math.round(hostBusyShare * 100)}% busy; CPU s by process ${cpuText(burstCpu)}`);
    const heldBeforeRun = await heldWrites(url);
    const burstHeld = heldSince(heldBeforeBurst, heldBeforeRun);
    console.error(`burst: ${burstHeld.requests} writes held for delivery (backpressure), ${burstHeld.seconds} s waited in all`);
    const beforeRun = await engines();
    const burstEngine = engineFigures(since(beforeBurst, beforeRun));
    console.error(`burst, as the engine measured it: ${burstEngine.line}`);

    const startedMs = Date.now();
    let running = true;
    const pollers = Array.from({ length: LONG_POLLERS }, (_, i) => longPoll(url, tenants[i % tenants.length] as Workspace, () => running));
    const stalls = watchStalls(url, ADMIN, topology.apiPid(), { bench: process.pid, ...(receiver.pid === undefined ? {} : { receiver: receiver.pid }) });
    /** [sent ms, latency ms] of each acknowledged write. */
    const latencies: [number, number][] = [];
    let failed = 0;
    const inFlight = new Set<Promise<void>>();
    let n = 0;
    const start = performance.now();
    for (let tick = 1; performance.now() < start + seconds * 1000; tick++) {
      // Open loop: writes go out on schedule whether or not earlier ones were answered.
      while (n < Math.floor((tick * TICK_MS * rate) / 1000)) {
        const sentMs = Date.now();
        const w = write(url, tenants, ++n).then((ms) => (ms === null ? void failed++ : void latencies.push([sentMs, ms])));
        inFlight.add(w);
        void w.finally(() => inFlight.delete(w));
      }
      await sleep(Math.max(0, start + tick * TICK_MS - performance.now()));
    }
    await Promise.all([...inFlight]);
    const stoppedMs = Date.now();
    const stallMinutes = await stalls.stop();
    const owed = (await eventsSince(url, tenants, startedMs)) * SUBSCRIPTIONS;
    const receivedInRun = await receiver.received(startedMs);
    running = false;
    const polled = (await Promise.all(pollers)).reduce((a, b) => a + b, 0);
    const end = await drain(url, tenants, receiver, startedMs);
    const runEngine = engineFigures(since(beforeRun, await engines()));
    console.error(`run, as the engine measured it: ${runEngine.line}`);
    const runHeld = heldSince(heldBeforeRun, await heldWrites(url));
    console.error(`run: ${runHeld.requests} writes held for delivery (backpressure), ${runHeld.seconds} s waited in all`);

    const inRun = end.firstAttempts.filter(([committed]) => committed >= startedMs && committed < stoppedMs);
    const lag = quantiles(inRun.map(([committed, arrived]) => arrived - committed));
    /** Quantiles of each minute's values, by the instant each was measured from. */
    const byMinute = (timed: readonly (readonly [number, number])[]) =>
      Array.from({ length: Math.ceil(seconds / 60) }, (_, m) =>
        quantiles(timed.filter(([at]) => at >= startedMs + m * 60_000 && at < startedMs + (m + 1) * 60_000).map(([, ms]) => ms)),
      );
    const perMinute = byMinute(inRun.map(([committed, arrived]) => [committed, arrived - committed] as const));
    const apiPerMinute = byMinute(latencies);
    // Each minute's slowest second of commits, by the wall clock: to set a late minute beside the
    // logs of the roles, Kafka's (.cache/run/kafka-PORT/server.log) and the host's.
    const lagsBySecond = Array.from({ length: Math.ceil(seconds / 60) }, () => new Map<number, number[]>());
    for (const [committed, arrived] of inRun) {
      const bySecond = lagsBySecond[Math.floor((committed - startedMs) / 60_000)];
      if (bySecond === undefined) continue;
      const second = Math.floor(committed / 1000);
      let lags = bySecond.get(second);
      if (lags === undefined) bySecond.set(second, (lags = []));
      lags.push(arrived - committed);
    }
    const slowestSecond = lagsBySecond.map((bySecond) => {
      const [second, p99] = [...bySecond].map(([at, lags]) => [at, quantiles(lags).p99] as const).reduce((a, b) => (b[1] > a[1] ? b : a), [0, -1] as const);
      return p99 < 0 ? null : { at: new Date(second * 1000).toISOString().slice(11, 19), p99 };
    });
    perMinute.forEach((q, m) =>
      console.error(
        `minute ${m + 1}: commit → first attempt p50 ${q.p50} ms, p99 ${q.p99} ms (${q.n} deliveries; the slowest second of commits ${slowestSecond[m]?.at ?? '-'} UTC, p99 ${slowestSecond[m]?.p99 ?? '-'} ms); API p99 ${apiPerMinute[m]?.p99} ms, ` +
          `max ${apiPerMinute[m]?.max} ms; API event loop lag max ${stallMinutes[m]?.loopLagMaxMs} ms, bare connect max ${stallMinutes[m]?.connectMaxMs} ms, ` +
          `listen overflows ${stallMinutes[m]?.listenOverflows}, client connects ${stallMinutes[m]?.clientConnects}, ` +
          `API main thread at most ${stallMinutes[m]?.mainThreadRunMaxMs} ms run and ${stallMinutes[m]?.runQueueWaitMaxMs} ms waiting for a core in 2 s; ` +
          `API memory at most ${stallMinutes[m]?.rssMaxMb} MB resident, heap ${stallMinutes[m]?.heapUsedMaxMb} MB (workers ${stallMinutes[m]?.workerHeapUsedMaxMb} MB), ` +
          `${stallMinutes[m]?.majorGcMs} ms in major GC; CPU s by thread ${cpuText(stallMinutes[m]?.threadCpuS)}; beside it ${cpuText(stallMinutes[m]?.processCpuS)}`,
      ),
    );

    // Start-up of the log the run left: stop, start again on the same folder, until /readyz answers.
    if (build === null) {
      console.error('building the service (npm run build) for a start of the compiled build too');
      build = await buildCompiled('bench-build-');
    }
    const startup = await topology.restart(build.main);
    console.error(`start-up of the log it left, ms until /readyz: ${Object.entries(startup).map(([k, ms]) => `${k} ${ms}`).join(', ')}`);

    const api = quantiles(latencies.map(([, ms]) => ms));
    // Retries due during the run only: the burst's come late behind its own backlog.
    const retriesDue = (from: number, to: number) => quantiles(end.retryLateMs.filter(([due]) => due >= from && due < to).map(([, late]) => late));
    const retries = retriesDue(startedMs, stoppedMs);
    const burstRetries = retriesDue(burstStartedMs, startedMs);
    return {
      bench: 'sustained',
      roles,
      workspaces,
      seconds,
      ceiling_writes_per_s: Math.round(ceilingPerS),
      burst_first_attempt_p50_ms: burst.p50,
      burst_first_attempt_p99_ms: burst.p99,
      burst_first_attempt_p99_by_second: burstBySecond.map((q) => q.p99).join(' '),
      burst_host_busy_share: hostBusyShare,
      burst_cpu_s_by_process: cpuField(burstCpu),
      burst_receiver_connections_by_second: connectionsBySecond.join(' '),
      burst_deliveries_per_s: Math.round(burst.n / burstSpanS),
      burst_retry_late_p99_ms: burstRetries.p99,
      burst_engine_fanout_p99_at_most_ms: burstEngine.fanOut.p99AtMostMs,
      burst_engine_first_attempt_start_p99_at_most_ms: burstEngine.first.p99AtMostMs,
      burst_writes_held: burstHeld.requests,
      burst_writes_held_seconds: burstHeld.seconds,
      writes_per_s: rate,
      writes: latencies.length,
      write_failures: failed,
      first_attempt_p50_ms: lag.p50,
      first_attempt_p99_ms: lag.p99,
      first_attempt_p99_by_minute: perMinute.map((q) => q.p99).join(' '),
      first_attempt_slowest_second_by_minute: slowestSecond.map((slowest) => (slowest === null ? '-' : `${slowest.at}=${slowest.p99}`)).join(' '),
      retry_late_p50_ms: retries.p50,
      retry_late_p99_ms: retries.p99,
      retries_measured: retries.n,
      engine_fanout_p50_at_most_ms: runEngine.fanOut.p50AtMostMs,
      engine_fanout_p99_at_most_ms: runEngine.fanOut.p99AtMostMs,
      engine_first_attempt_start_p50_at_most_ms: runEngine.first.p50AtMostMs,
      engine_first_attempt_start_p99_at_most_ms: runEngine.first.p99AtMostMs,
      engine_retry_start_within_100ms: Number(runEngine.retry.within.toFixed(4)),
      engine_retry_start_p99_at_most_ms: runEngine.retry.p99AtMostMs,
      engine_retries: runEngine.retry.count,
      writes_held: runHeld.requests,
      writes_held_seconds: runHeld.seconds,
      false_timeouts: end.falseFailures,
      backlog_at_end: Math.max(0, owed - receivedInRun),
      undelivered_after_drain: Math.max(0, owed - end.firstAttempts.filter(([c]) => c >= startedMs).length),
      api_p50_ms: api.p50,
      api_p99_ms: api.p99,
      api_p99_by_minute: apiPerMinute.map((q) => q.p99).join(' '),
      api_max_by_minute: apiPerMinute.map((q) => q.max).join(' '),
      api_loop_lag_max_ms_by_minute: stallMinutes.map((m) => m.loopLagMaxMs).join(' '),
      api_connect_max_ms_by_minute: stallMinutes.map((m) => m.connectMaxMs).join(' '),
      listen_overflows_by_minute: stallMinutes.map((m) => m.listenOverflows).join(' '),
      api_main_thread_run_max_ms_by_minute: stallMinutes.map((m) => m.mainThreadRunMaxMs).join(' '),
      api_run_queue_wait_max_ms_by_minute: stallMinutes.map((m) => m.runQueueWaitMaxMs).join(' '),
      api_rss_max_mb_by_minute: stallMinutes.map((m) => m.rssMaxMb).join(' '),
      api_heap_used_max_mb_by_minute: stallMinutes.map((m) => m.heapUsedMaxMb).join(' '),
      api_worker_heap_used_max_mb_by_minute: stallMinutes.map((m) => m.workerHeapUsedMaxMb).join(' '),
      api_major_gc_ms_by_minute: stallMinutes.map((m) => m.majorGcMs).join(' '),
      api_thread_cpu_s_by_minute: stallMinutes.map((m) => cpuField(m.threadCpuS)).join(' '),
      bench_process_cpu_s_by_minute: stallMinutes.map((m) => cpuField(m.processCpuS)).join(' '),
      long_poll_items: polled,
      ...startup,
    };
  } finally {
    await (topology?.stop() ?? group.stopAll());
    await writers.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
    if (build !== null) rmSync(build.dir, { recursive: true, force: true });
  }
}
