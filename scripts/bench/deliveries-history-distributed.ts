// Delivery-history pages and restarts at a million deliveries in the distributed mode:
// `BENCH_ROLE=api npm run bench -- deliveries-history [--long]`, with KAFKA_BROKERS set (the caller's
// Kafka) and a private redis-server started here (nothing of an earlier run is reused). The log holds
// BENCH_DELIVERIES (1,000,000) settled deliveries of one subscription, recorded as in the embedded
// mode (delivery-records.ts). Reported, each a process start until it answers /readyz:
//   before  an API server and a dispatcher without REDIS_URL: the API server builds its index in
//           memory from the whole log, the dispatcher restores from every delivery record (each
//           waited for BENCH_BEFORE_LIMIT_S, 180 s; -1 in the JSON when not ready by then);
//   after   with REDIS_URL: a dispatcher's first start (it builds the shared index from the log),
//           its restart (from the index's checkpoint and waiting deliveries), an API server's start
//           (it reads the index, builds nothing).
// Then, for BENCH_SECONDS while tickets are written (their deliveries recorded and indexed by the
// dispatcher), page p99 on that API server as in the embedded mode, then a replay's start as there. The ceiling, in the same run:
// the bare Redis range query behind a page (one Lua call: reverse range by score, then the JSON of
// its ids), from this process.
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { DELIVERY_INDEX_VERSION } from '../../projections/deliveries-index.js';
import { clusterEnv, type RoleProcess } from '../../test/support/processes.js';
import { startPrivateRedis } from '../../test/support/redis-server.js';
import { inBenchCluster, measurePages, measureReplayStart, pageFields, prepareHistory, replayStartFields, report, reportReplayStart, timedStart } from './deliveries-history.js';
import { quantiles } from './quantiles.js';

const TAG = `{dh:v${DELIVERY_INDEX_VERSION}}`;
/** How long a start without Redis is waited for (the memory index of an API server grows slower than linearly). */
const BEFORE_LIMIT_MS = Number(process.env['BENCH_BEFORE_LIMIT_S'] ?? 180) * 1000;
const RANGE = `local ids = redis.call('ZREVRANGEBYSCORE', KEYS[1], ARGV[1], '-inf', 'LIMIT', 0, 21)
if #ids == 0 then return {} end
return redis.call('HMGET', KEYS[2], unpack(ids))`;

/** The ceiling: a page's range query and fetch, bare, at random places in the history. */
const bareRanges = async (url: string, subscriptionId: string, oldest: number, newest: number, count: number): Promise<number[]> => {
  const client = new Redis(url);
  const times: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const began = performance.now();
      const rows = (await client.eval(RANGE, 2, `${TAG}:s:${subscriptionId}`, `${TAG}:docs`, String(oldest + Math.floor(Math.random() * (newest - oldest))))) as string[];
      rows.map((json) => JSON.parse(json) as unknown);
      times.push(performance.now() - began);
    }
  } finally {
    client.disconnect();
  }
  return times;
};

export const runDistributed = async ({ long }: { long: boolean }) => {
  const brokers = process.env['KAFKA_BROKERS'];
  if (brokers === undefined) throw new Error('BENCH_ROLE=api needs KAFKA_BROKERS (e.g. KAFKA_PORT=19092 bash scripts/kafka.sh start)');
  const deliveries = Number(process.env['BENCH_DELIVERIES'] ?? 1_000_000);
  const seconds = Number(process.env['BENCH_SECONDS'] ?? (long ? 120 : 30));
  const redis = await startPrivateRedis();
  // Without REDIS_URL unless a role is given it: the "before" figures are of the roles without Redis.
  const { REDIS_URL: _redis, ...cluster } = clusterEnv('bench-history', redis.url, brokers);
  const withRedis = { REDIS_URL: redis.url };
  const stop = async (service: RoleProcess) => {
    service.kill('SIGTERM');
    await service.exited;
  };
  try {
    return await inBenchCluster(cluster, async ({ dataDir, receiver, group }) => {
      const { key, big, small } = await prepareHistory(() => group.start('prepare', { ROLE: 'api' }), dataDir, receiver.url, deliveries);
      await group.start('relay', { ROLE: 'relay' });

      /** A start without Redis, or null when it is not ready within BEFORE_LIMIT_MS (then every process is stopped, and the relay started again). */
      const before = async (name: string, role: string): Promise<number | null> => {
        const started = await Promise.race([timedStart(() => group.start(name, { ROLE: role })), sleep(BEFORE_LIMIT_MS).then(() => null)]);
        if (started !== null) {
          await stop(started.service);
          return started.ms;
        }
        await group.stopAll();
        await group.start('relay again', { ROLE: 'relay' });
        return null;
      };
      const shown = (ms: number | null) => (ms === null ? `not ready after ${BEFORE_LIMIT_MS} ms` : `${ms} ms`);
      const apiBefore = await before('api without Redis (memory index from the whole log)', 'api');
      console.error(`before: an API server's start, its index built in memory from the log: ${shown(apiBefore)}`);
      const dispatcherBefore = await before('dispatcher without Redis (restores from the whole log)', 'dispatcher');
      console.error(`before: a dispatcher's start, restored from every delivery record of the log: ${shown(dispatcherBefore)}`);

      const build = await timedStart(() => group.start('dispatcher, first start with Redis (builds the index)', { ROLE: 'dispatcher', ...withRedis }));
      console.error(`after: a dispatcher's first start, the shared index built from the log: ${build.ms} ms`);
      await stop(build.service);
      const restart = await timedStart(() => group.start('dispatcher restart with Redis (resumes from the index)', { ROLE: 'dispatcher', ...withRedis }));
      console.error(`after: a dispatcher's restart, from the index: ${restart.ms} ms`);
      const apiAfter = await timedStart(() => group.start('api with Redis (reads the index)', { ROLE: 'api', ...withRedis }));
      console.error(`after: an API server's start, reading the index in Redis: ${apiAfter.ms} ms`);

      const figures = await measurePages({ url: apiAfter.service.url, key, big, small, seconds }, async (oldest, newest) => quantiles(await bareRanges(redis.url, big, oldest, newest, 5_000)));
      report(deliveries, figures, figures.ceiling, 'the bare Redis range query and fetch behind a page');
      const replayStart = await measureReplayStart({ url: apiAfter.service.url, key, big, small }, receiver);
      reportReplayStart(replayStart);
      return {
        bench: 'deliveries-history',
        role: 'api',
        deliveries,
        filled: 'log (packed delivery records), indexed in Redis by the dispatcher',
        seconds,
        // -1: not ready within BENCH_BEFORE_LIMIT_S.
        api_start_memory_index_ms: apiBefore ?? -1,
        dispatcher_start_whole_log_ms: dispatcherBefore ?? -1,
        dispatcher_first_start_builds_index_ms: build.ms,
        dispatcher_restart_from_index_ms: restart.ms,
        api_start_redis_index_ms: apiAfter.ms,
        ...pageFields(figures),
        ceiling_range_p50_ms: figures.ceiling.p50,
        ceiling_range_p99_ms: figures.ceiling.p99,
        ...replayStartFields(replayStart),
      };
    });
  } finally {
    await redis.stop();
  }
};
