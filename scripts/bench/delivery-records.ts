// A delivery history recorded straight into the log as the dispatcher records it: packed
// delivery.recorded events of 100 settled deliveries each (mostly delivered, some failed, a few
// cancelled), of mixed event types, created over the last 20 days. For the benchmarks that need a
// large history (deliveries-history, startup).
import { randomBytes } from 'node:crypto';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { JsonObject } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const PER_RECORD = 100;
const RECORDS_PER_APPEND = 10;
export const HISTORY_SPAN_US = 20 * 86_400_000_000;
export const DELIVERY_EVENT_TYPES = ['ticket.created', 'ticket.updated', 'message.created', 'contact.updated'];

const hex = () => randomBytes(16).toString('hex');

/** One settled delivery's steps, as the dispatcher records them: mostly delivered, some failed, a few cancelled. */
const deliverySteps = (subscriptionId: string, n: number, createdAt: number, fanned: number): { type: string; data: JsonObject }[] => {
  const id = hex();
  const scheduled = {
    type: 'delivery.scheduled',
    data: { delivery_id: id, subscription_id: subscriptionId, event_id: hex(), event_type: DELIVERY_EVENT_TYPES[n % DELIVERY_EVENT_TYPES.length] as string, event_position: fanned, fanned_out_through: fanned, scheduled_at: createdAt },
  };
  if (n % 50 === 0) return [scheduled, { type: 'delivery.cancelled', data: { delivery_id: id, round: 1, reason: 'subscription_inactive', cancelled_at: createdAt + 1 } }];
  const delivered = n % 12 !== 0;
  const attempted = {
    delivery_id: id,
    round: 1,
    attempt: 1,
    delivered,
    status_code: delivered ? 200 : 500,
    error: delivered ? null : 'http 500',
    latency_ms: 12,
    attempted_at: createdAt + 20_000,
    next_attempt_at: null,
  };
  return [scheduled, { type: 'delivery.attempted', data: attempted }];
};

/** `count` deliveries of the subscription appended to the log, oldest first, created over the last 20 days. */
export const recordHistory = async (file: string, workspaceId: string, subscriptionId: string, count: number): Promise<void> => {
  const log = openSqliteLog({ file, shared: true });
  const fanned = await log.headPosition();
  const now = Date.now() * 1000;
  for (let n = 0; n < count; ) {
    const events = [];
    for (let r = 0; r < RECORDS_PER_APPEND && n < count; r++) {
      const steps = [];
      for (let d = 0; d < PER_RECORD && n < count; d++, n++) steps.push(...deliverySteps(subscriptionId, n, now - HISTORY_SPAN_US + Math.floor((n * HISTORY_SPAN_US) / count), fanned));
      events.push({ id: hex(), workspaceId, ...packSteps(steps) });
    }
    await log.append(deliveryStream(subscriptionId), events, 'any');
    if (n % 100_000 === 0) console.error(`  ${n} deliveries recorded`);
  }
  await log.close();
};
