// Distributed dispatcher restart benchmark: what a dispatcher role holds, and for how long, while it
// takes a dead receiver's backlog over at start. `npm run bench -- dispatcher-restart [--long]`;
// `BENCH_WAITING` sets the backlog (default 100,000; --long 300,000).
//
// The backlog a first dispatcher leaves against a receiver that refuses every attempt
// (backlog-kit.ts: a SQLite log, the delivery history index and the retry schedule in a private
// Redis, under the keys a role uses). Then a second dispatcher restarts from it as a dispatcher
// role does: its index thread (a worker thread, as in the role) catches the index up and reads what
// waits, and the main thread offers each delivery to the shared schedule. Figures: the time from
// the start of the read to the last offer, the heap the main thread retained meanwhile (after a
// full GC, sampled every 250 ms) and the index thread's heap in use at most (sampled as often), the
// longest the main thread's event loop was held, the CPU time Redis spent meanwhile (every role
// shares it), and when the first page was in (a role consumes Kafka from then on, the take-over
// going on meanwhile). The ceiling: the same restart with the index read on the main thread itself
// (no thread, nothing handed between threads), on a fresh backlog of the same size.
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { backgroundCore } from '../../src/app/log-core.js';
import { loadConfig } from '../../src/config/config.js';
import { systemMicros } from '../../src/log/clock.js';
import { sharedHistory } from '../../src/webhooks/dispatch/shared-history.js';
import { backlog, dispatcherOf, engine, heapAfterGc, mb, REFUSED, restart, URL, watchLoop, withRun } from './backlog-kit.js';
import { round } from './fanout.js';

interface Restarted {
  readonly ms: number;
  readonly heapMb: number;
  readonly loopHeldMaxMs: number;
  /** The index thread's heap in use at most; null for the ceiling (no thread). */
  readonly threadHeapMb: number | null;
  readonly redisCpuS: number;
  /** When the first page was in, from which on a role consumes; null for the ceiling. */
  readonly consumingAfterMs: number | null;
}

/** Redis' CPU time so far, user and system (s). */
const redisCpu = async (): Promise<number> => {
  const client = new Redis(URL);
  try {
    const info = await client.info('cpu');
    const figure = (name: string): number => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
    return figure('used_cpu_user') + figure('used_cpu_sys');
  } finally {
    client.disconnect();
  }
};

/** The ceiling: the index read on this thread, as the kit's restart does. */
const inProcess = (events: number): Promise<Restarted> =>
  withRun(
    async (run) => {
      await backlog(run, events);
      const second = dispatcherOf(run, REFUSED, { n: 0 });
      const cpu = await redisCpu();
      const watch = watchLoop(heapAfterGc());
      const ms = await restart(run, second);
      const { heldMs, heapMb } = watch.stop();
      const redisCpuS = round((await redisCpu()) - cpu, 1);
      await second.stop();
      return { ms, heapMb, loopHeldMaxMs: heldMs, threadHeapMb: null, redisCpuS, consumingAfterMs: null };
    },
    { asRole: true },
  );

/** As a dispatcher role restarts: its index thread reads, the main thread offers. */
const throughThread = (events: number): Promise<Restarted> =>
  withRun(
    async (run) => {
      await backlog(run, events);
      // The role's index thread applies from here on (the bench's indexer would apply beside it, harmlessly, but on this loop).
      await run.indexer.runner.stop();
      const config = loadConfig({ ROLE: 'dispatcher', DATA_DIR: run.dir, REDIS_URL: URL, KAFKA_BROKERS: '127.0.0.1:9' });
      const history = sharedHistory(backgroundCore(config, run.log, systemMicros), URL);
      await history.feature.start?.();
      const threadHeap = history.feature.workers?.[0]?.usedBytes;
      try {
        const second = dispatcherOf(run, REFUSED, { n: 0 }, { records: history.records });
        let threadMost = 0;
        let done = false;
        const sampling = (async () => {
          while (!done) {
            threadMost = Math.max(threadMost, (await threadHeap?.()) ?? 0);
            await sleep(250);
          }
        })();
        const baseline = (await threadHeap?.()) ?? 0;
        const cpu = await redisCpu();
        const watch = watchLoop(heapAfterGc());
        const started = performance.now();
        const taken = await history.restore();
        // The first page is in: a role consumes from here on, the take-over going on meanwhile.
        const consumingAfterMs = round(performance.now() - started, 0);
        await second.resume(taken.deliveries, taken.fannedOutThrough);
        const ms = round(performance.now() - started, 0);
        const { heldMs, heapMb } = watch.stop();
        const redisCpuS = round((await redisCpu()) - cpu, 1);
        done = true;
        await sampling;
        await second.stop();
        return { ms, heapMb, loopHeldMaxMs: heldMs, threadHeapMb: mb(Math.max(0, threadMost - baseline)), redisCpuS, consumingAfterMs };
      } finally {
        await history.feature.stop?.();
      }
    },
    { asRole: true },
  );

const line = (how: string, events: number, result: Restarted): string =>
  `dispatcher-restart (${how}): ${events} waiting offered in ${result.ms} ms (Redis ${result.redisCpuS} CPU s), main thread ${result.heapMb} MB retained at most, its loop held ${result.loopHeldMaxMs} ms at most` +
  (result.threadHeapMb === null ? '' : `, index thread ${result.threadHeapMb} MB more in use at most`) +
  (result.consumingAfterMs === null ? '' : `; it consumes from ${result.consumingAfterMs} ms on`);

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_WAITING'] ?? (long ? 300_000 : 100_000));
  await engine('redis', 'start');
  try {
    const ceiling = await inProcess(events);
    console.log(line('ceiling: the index read on the main thread', events, ceiling));
    const role = await throughThread(events);
    console.log(line('as the role restarts', events, role));
    return {
      bench: 'dispatcher-restart',
      waiting: events,
      ceiling_ms: ceiling.ms,
      ceiling_heap_mb: ceiling.heapMb,
      restart_ms: role.ms,
      ratio: round(ceiling.ms / role.ms, 2),
      main_heap_mb: role.heapMb,
      main_loop_held_max_ms: role.loopHeldMaxMs,
      index_thread_heap_mb: role.threadHeapMb ?? 0,
      ceiling_redis_cpu_s: ceiling.redisCpuS,
      redis_cpu_s: role.redisCpuS,
      consuming_after_ms: role.consumingAfterMs ?? 0,
    };
  } finally {
    await engine('redis', 'stop');
  }
}
