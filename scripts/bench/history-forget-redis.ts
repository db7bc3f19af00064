// History-forget benchmark of the distributed mode's delivery history index in Redis
// (projections/deliveries-index-redis.ts): what a deleted webhook's long history costs the other
// subscriptions, whose records the index applies while it goes. `npm run bench -- history-forget-redis
// [--long]`; `BENCH_DELIVERIES` sets the deleted subscription's deliveries (default 400,000; --long
// 1,000,000). On a Redis of the bench's own. Figures: how long the apply carrying the deletion marker
// took, how soon a record of another subscription applied with it was paged, how long until the
// history was gone, and the longest a PING waited meanwhile. The ceiling: a copy of the same history
// dropped with `forget`, scripts back to back (what the apply with the marker waited for before the
// rest went after it).
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import type { ProjectedEvent } from '../../projections/tickets-store.js';
import { deliveryLog } from '../../test/support/delivery-steps.js';
import { engine as engines } from './engines.js';
import { round } from './fanout.js';

const REDIS_PORT = Number(process.env['BENCH_REDIS_PORT'] ?? 6397);
/** Deliveries per packed record, as a busy dispatcher writes them. */
const RECORD = 500;

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const deliveries = Number(process.env['BENCH_DELIVERIES'] ?? (long ? 1_000_000 : 400_000));
  const engine = engines({ redis: REDIS_PORT, kafka: 0 });
  await engine('redis', 'start');
  const index = openRedisDeliveryIndex({ url: `redis://127.0.0.1:${REDIS_PORT}`, keyPrefix: `bench${Date.now()}:`, lingerMs: 0 });
  try {
    await index.checkpoint();
    const log = deliveryLog(1_700_000_000_000_000);
    const record = (sub: string, from: number, count: number): ProjectedEvent =>
      log.record(sub, Array.from({ length: count }, (_, i) => [...log.schedule(sub, `${sub}-${from + i}`, { fannedOutThrough: 1 }), ...log.attempt(`${sub}-${from + i}`, 'delivered')]).flat());
    const fill = async (sub: string): Promise<void> => {
      const applied: Promise<void>[] = [];
      for (let n = 0; n < deliveries; n += RECORD) applied.push(index.apply(record(sub, n, Math.min(RECORD, deliveries - n))) as Promise<void>);
      await Promise.all(applied);
    };
    const left = async (sub: string): Promise<number> => (await index.page({ subscriptionId: sub, limit: 1 })).items.length;
    /** Runs `work` and the longest a PING waited meanwhile, a PING after another. */
    const pinging = async (work: () => Promise<void>): Promise<{ ms: number; pingMaxMs: number }> => {
      let done = false;
      let pingMaxMs = 0;
      const pings = (async () => {
        while (!done) {
          const sent = performance.now();
          await index.client.ping();
          pingMaxMs = Math.max(pingMaxMs, performance.now() - sent);
        }
      })();
      const started = performance.now();
      await work();
      const ms = performance.now() - started;
      done = true;
      await pings;
      return { ms: round(ms, 0), pingMaxMs: round(pingMaxMs, 1) };
    };

    const filledAt = performance.now();
    await fill('copy');
    await fill('deleted');
    console.log(`history-forget-redis: ${deliveries} deliveries each of two subscriptions applied in ${round((performance.now() - filledAt) / 1000, 1)} s`);
    const ceiling = await pinging(() => index.forget('copy'));
    if ((await left('copy')) !== 0) throw new Error('the ceiling left deliveries behind');
    console.log(`history-forget-redis: ceiling: ${deliveries} deliveries dropped by forget, scripts back to back, in ${ceiling.ms} ms; a PING waited ${ceiling.pingMaxMs} ms at most`);

    let markerMs = 0;
    let otherPagedMs = -1;
    const forget = await pinging(async () => {
      const started = performance.now();
      // In log order, as the index's runner applies: the marker, then another subscription's record.
      const marker = log.deleted('deleted');
      const other = record('other', 0, 1);
      const applied = Promise.all([index.apply(marker), index.apply(other)]).then(() => (markerMs = round(performance.now() - started, 0)));
      while (otherPagedMs < 0) {
        if ((await left('other')) > 0) otherPagedMs = round(performance.now() - started, 0);
      }
      await applied;
      while ((await left('deleted')) > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    });
    console.log(
      `history-forget-redis: the apply with the marker took ${markerMs} ms, another subscription's record applied with it was paged after ${otherPagedMs} ms; the history was gone after ${forget.ms} ms (${round(forget.ms / Math.max(1, ceiling.ms), 2)} of the ceiling's time); a PING waited ${forget.pingMaxMs} ms at most`,
    );
    return {
      bench: 'history-forget-redis',
      deliveries,
      ceiling_ms: ceiling.ms,
      ceiling_ping_max_ms: ceiling.pingMaxMs,
      marker_apply_ms: markerMs,
      other_paged_ms: otherPagedMs,
      forget_ms: forget.ms,
      ping_max_ms: forget.pingMaxMs,
    };
  } finally {
    await index.close();
    await engine('redis', 'stop');
  }
}
