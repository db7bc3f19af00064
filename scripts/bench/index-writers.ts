// Delivery-history index writers benchmark: what a second writer applying the one Redis index at the
// same time costs (both tail the log and apply it; the second mostly finds its batches applied). Every
// second dispatcher did so until one index thread at a time held the index's lease; now it is the
// overlap of a holder stalled past its lease. `npm run bench -- index-writers [--long]`.
//
// A private Redis (scripts/redis.sh on the bench's own port) and a shared SQLite log to which delivery
// records are appended as a dispatcher records them: every 20 ms a record of the deliveries just
// scheduled and one of those scheduled 100 ms before, now delivered (RATE deliveries/s). Each round
// runs either one indexer (the ceiling: the work itself) or two on connections of their own, until
// both have applied the whole log; the two kinds alternate. Reported per kind: this process's CPU
// seconds, Redis's CPU seconds and its time in scripts (EVALSHA). The second writer's cost is the
// difference.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { JsonObject } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { createHistoryIndexer } from '../../src/webhooks/dispatch/history-index.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { engine as engines } from './engines.js';
import { round } from './fanout.js';

const REDIS_PORT = 6398;
const URL = `redis://127.0.0.1:${REDIS_PORT}`;
const engine = engines({ kafka: 0, redis: REDIS_PORT });
const RATE = 2_500;
const TICK_MS = 20;
/** How long after its scheduling a delivery is recorded delivered. */
const SETTLE_MS = 100;
const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);

const hex = (): string => randomBytes(16).toString('hex');

interface Costs {
  readonly nodeCpuS: number;
  readonly redisCpuS: number;
  readonly redisScriptMs: number;
  readonly deliveries: number;
}

const redisFigures = async (admin: Redis): Promise<{ cpuS: number; scriptMs: number }> => {
  const [cpu, commands] = [await admin.info('cpu'), await admin.info('commandstats')];
  const figure = (text: string, pattern: RegExp): number => Number(pattern.exec(text)?.[1] ?? 0);
  return {
    cpuS: figure(cpu, /used_cpu_sys:([0-9.]+)/) + figure(cpu, /used_cpu_user:([0-9.]+)/),
    scriptMs: figure(commands, /cmdstat_evalsha:calls=\d+,usec=(\d+)/) / 1000,
  };
};

const scheduled = (deliveryId: string, at: number): { type: string; data: JsonObject } => ({
  type: 'delivery.scheduled',
  data: { delivery_id: deliveryId, subscription_id: SUBSCRIPTION, event_id: hex(), event_type: 'ticket.created', event_position: 1, fanned_out_through: 1, scheduled_at: at },
});

const delivered = (deliveryId: string, at: number): { type: string; data: JsonObject } => ({
  type: 'delivery.attempted',
  data: { delivery_id: deliveryId, round: 1, attempt: 1, delivered: true, status_code: 200, error: null, latency_ms: 12, attempted_at: at, next_attempt_at: null },
});

/** One round: `writers` indexers keep one index from a log recorded at RATE for `seconds`. */
const roundOf = async (admin: Redis, writers: number, seconds: number): Promise<Costs> => {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-index-writers-'));
  const file = path.join(dir, 'events.sqlite');
  const log = openSqliteLog({ file, shared: true });
  const keyPrefix = `bench-${hex()}:`;
  const indexers = [];
  for (let i = 0; i < writers; i++) {
    const own = openSqliteLog({ file, shared: true });
    const index = openRedisDeliveryIndex({ url: URL, keyPrefix });
    const indexer = createHistoryIndexer(own, index, { retentionMs: 30 * 86_400_000, clock: () => Date.now() * 1000 });
    await indexer.start();
    indexers.push({ own, index, indexer });
  }
  try {
    await admin.config('RESETSTAT');
    const redisBefore = await redisFigures(admin);
    const cpu = process.cpuUsage();
    const waiting: { id: string; at: number }[] = [];
    let deliveries = 0;
    const started = performance.now();
    for (let tick = 1; performance.now() < started + seconds * 1000; tick++) {
      const now = Date.now() * 1000;
      const fresh = Array.from({ length: (RATE * TICK_MS) / 1000 }, () => ({ id: hex(), at: now }));
      waiting.push(...fresh);
      const settled = waiting.splice(0, Math.max(0, waiting.length - (RATE * SETTLE_MS) / 1000));
      const steps = [packSteps(fresh.map(({ id, at }) => scheduled(id, at)))];
      if (settled.length > 0) steps.push(packSteps(settled.map(({ id, at }) => delivered(id, at + 20_000))));
      await log.append(deliveryStream(SUBSCRIPTION), steps.map((step) => ({ id: hex(), workspaceId: WORKSPACE, ...step })), 'any');
      deliveries += fresh.length;
      // Paced by the clock, not by the appends' time: RATE holds while an append takes under a tick.
      await sleep(Math.max(0, started + tick * TICK_MS - performance.now()));
    }
    const head = await log.headPosition();
    await Promise.all(indexers.map(({ indexer }) => indexer.runner.waitFor(head)));
    const used = process.cpuUsage(cpu);
    const redisAfter = await redisFigures(admin);
    return { nodeCpuS: (used.user + used.system) / 1e6, redisCpuS: redisAfter.cpuS - redisBefore.cpuS, redisScriptMs: redisAfter.scriptMs, deliveries };
  } finally {
    for (const { own, index, indexer } of indexers) {
      await indexer.stop();
      await index.close();
      await own.close();
    }
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

const mean = (costs: readonly Costs[], key: keyof Costs): number => costs.reduce((sum, c) => sum + c[key], 0) / costs.length;

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const [rounds, seconds] = opts.long ? [6, 15] : [3, 8];
  console.log(`index-writers: delivery records at ${RATE} deliveries/s for ${seconds} s a round; one indexer and two, alternating, ${rounds} rounds each`);
  await engine('redis', 'start');
  const admin = new Redis(URL);
  const runs: Record<1 | 2, Costs[]> = { 1: [], 2: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      for (const writers of r % 2 === 0 ? ([1, 2] as const) : ([2, 1] as const)) {
        const costs = await roundOf(admin, writers, seconds);
        runs[writers].push(costs);
        console.log(
          `  ${writers} ${writers === 1 ? 'indexer ' : 'indexers'}  this process ${costs.nodeCpuS.toFixed(2)} CPU s, Redis ${costs.redisCpuS.toFixed(2)} CPU s (${Math.round(costs.redisScriptMs)} ms in scripts), ${costs.deliveries.toLocaleString('en')} deliveries`,
        );
      }
    }
  } finally {
    admin.disconnect();
    await engine('redis', 'stop');
  }
  const [one, two] = [runs[1], runs[2]];
  const second = mean(two, 'nodeCpuS') - mean(one, 'nodeCpuS');
  console.log(
    `the second indexer: +${second.toFixed(2)} CPU s here (${((100 * second) / mean(one, 'nodeCpuS')).toFixed(0)}% of the first's round), ` +
      `+${(mean(two, 'redisScriptMs') - mean(one, 'redisScriptMs')).toFixed(0)} ms of Redis scripts`,
  );
  return {
    bench: 'index-writers',
    deliveries_per_s: RATE,
    seconds,
    one_writer_cpu_s: round(mean(one, 'nodeCpuS'), 2),
    two_writers_cpu_s: round(mean(two, 'nodeCpuS'), 2),
    second_writer_cpu_s: round(second, 2),
    one_writer_redis_cpu_s: round(mean(one, 'redisCpuS'), 2),
    two_writers_redis_cpu_s: round(mean(two, 'redisCpuS'), 2),
    one_writer_redis_script_ms: Math.round(mean(one, 'redisScriptMs')),
    two_writers_redis_script_ms: Math.round(mean(two, 'redisScriptMs')),
  };
}
