// Delivery-history index growth benchmark: what the embedded index (projections/deliveries-index-
// sqlite.ts, the thread `delivery-index`) spends per delivery as it grows, fed as the dispatcher
// records: packed records of deliveries scheduled and, 400 deliveries later, delivered, applied and
// committed in batches, three times: with delivery ids as the dispatcher derives them (src/domain/
// delivery/ids.ts: the event id's milliseconds, then a hash), as an older release derived them (the
// hash alone, so each new row landed on a random page of the index on `id`), and the ceiling: ids of
// a counter, then random, whose rows land on that index's last pages. Reported: CPU µs per delivery
// over each step of STEP deliveries, for each.
// `npm run bench -- index-growth [--long]`: 1,000,000 deliveries each (--long: 3,000,000).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryIdOf, deliveryStream, legacyDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import { eventId } from '../../src/shared/ids.js';
import type { JsonObject } from '../../src/log/event-log.js';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';

const STEP = 200_000;
/** Deliveries a record carries (the dispatcher packs what one turn scheduled or settled). */
const PER_RECORD = 40;
/** A delivery is recorded delivered this many deliveries after it was scheduled. */
const SETTLE_AFTER = 400;
const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTIONS = Array.from({ length: 10 }, (_, i) => `${i}`.repeat(32));
const STREAM = deliveryStream(SUBSCRIPTIONS[0] as string);

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');

const scheduled = (id: string, subscription: string, position: number, at: number): { type: string; data: JsonObject } => ({
  type: 'delivery.scheduled',
  data: { delivery_id: id, subscription_id: subscription, event_id: hex(16), event_type: 'message.created', event_position: position, fanned_out_through: position, scheduled_at: at },
});

const delivered = (id: string, at: number): { type: string; data: JsonObject } => ({
  type: 'delivery.attempted',
  data: { delivery_id: id, round: 1, attempt: 1, delivered: true, status_code: 200, error: null, latency_ms: 12, attempted_at: at, next_attempt_at: null },
});

/** CPU µs per delivery for each STEP of `total`, with ids from `idOf` (of the delivery's number and subscription). */
const feed = async (total: number, idOf: (n: number, subscription: string) => string): Promise<{ usPerDelivery: number[]; fileMb: number }> => {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-index-growth-'));
  const file = path.join(dir, 'deliveries.sqlite');
  const index = openSqliteDeliveryIndex({ file });
  const usPerDelivery: number[] = [];
  try {
    let position = 0;
    const waiting: { id: string; subscription: string }[] = [];
    let cpu = process.cpuUsage();
    for (let n = 0; n < total; n += PER_RECORD) {
      const at = Date.now() * 1000;
      const fresh = Array.from({ length: PER_RECORD }, (_, i) => {
        const subscription = SUBSCRIPTIONS[(n + i) % SUBSCRIPTIONS.length] as string;
        return { id: idOf(n + i, subscription), subscription };
      });
      waiting.push(...fresh);
      const settled = waiting.splice(0, Math.max(0, waiting.length - SETTLE_AFTER));
      // One record of those just scheduled and one of those settled, in one stream (the index reads
      // each delivery's subscription from its steps, not from the stream).
      for (const steps of [fresh.map(({ id, subscription }) => scheduled(id, subscription, position + 1, at)), settled.map(({ id }) => delivered(id, at + 20_000))]) {
        if (steps.length === 0) continue;
        position += 1;
        void index.apply({ id: hex(16), workspaceId: WORKSPACE, stream: STREAM, revision: position, position, ...packSteps(steps) });
      }
      if ((n + PER_RECORD) % STEP === 0) {
        index.commit();
        const used = process.cpuUsage(cpu);
        usPerDelivery.push(Math.round(((used.user + used.system) / STEP) * 10) / 10);
        cpu = process.cpuUsage();
      }
    }
    index.commit();
    return { usPerDelivery, fileMb: Math.round(statSync(file).size / 1e6) };
  } finally {
    await index.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const total = opts.long ? 3_000_000 : 1_000_000;
  console.log(`index-growth: ${total} deliveries into the embedded delivery-history index, CPU µs per delivery by ${STEP}`);
  // Counter-first ids: the ceiling, rows on the last pages of the id index.
  const ordered = await feed(total, (n) => `${n.toString(16).padStart(12, '0')}${hex(10)}`);
  console.log(`ids of a counter (ceiling): ${ordered.usPerDelivery.join(', ')} µs per delivery (${ordered.fileMb} MB)`);
  const delivered = await feed(total, (_, subscription) => deliveryIdOf(eventId(), subscription));
  console.log(`ids as derived (event time, then hash): ${delivered.usPerDelivery.join(', ')} µs per delivery (${delivered.fileMb} MB)`);
  const hashed = await feed(total, (_, subscription) => legacyDeliveryIdOf(eventId(), subscription));
  console.log(`hashed ids (an older release): ${hashed.usPerDelivery.join(', ')} µs per delivery (${hashed.fileMb} MB)`);
  const last = (steps: number[]) => steps.at(-1) ?? NaN;
  const growth = (steps: number[]) => Number((last(steps) / (steps[0] ?? NaN)).toFixed(2));
  return {
    bench: 'index-growth',
    deliveries: total,
    ...Object.fromEntries(
      Object.entries({ delivered, hashed, ordered }).flatMap(([name, { usPerDelivery }]) => [
        [`${name}_us_per_delivery_by_step`, usPerDelivery.join(' ')],
        [`${name}_last_step_us`, last(usPerDelivery)],
        [`${name}_growth`, growth(usPerDelivery)],
      ]),
    ),
    delivered_against_ceiling: Number((last(delivered.usPerDelivery) / last(ordered.usPerDelivery)).toFixed(2)),
    hashed_against_ceiling: Number((last(hashed.usPerDelivery) / last(ordered.usPerDelivery)).toFixed(2)),
  };
}
