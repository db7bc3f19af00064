// Deterministic ids, so a fan-out replayed after a crash lands on the same delivery (same
// X-Webhook-Id), and a repeated record of the same steps is dropped by the log.
import { createHash } from 'node:crypto';
import type { JsonObject } from '../../log/event-log.js';

const hex32 = (text: string): string => createHash('sha256').update(text).digest('hex').slice(0, 32);

/** The X-Webhook-Id: one per (event, subscription), the same in every attempt. */
export const deliveryIdOf = (eventId: string, subscriptionId: string): string => hex32(`delivery:${eventId}:${subscriptionId}`);

/** A replayed delivery's X-Webhook-Id: one per (event, subscription, replay), so a replay driven again after a restart finds what it scheduled. */
export const replayDeliveryIdOf = (eventId: string, subscriptionId: string, replayId: string): string => hex32(`replay:${replayId}:${eventId}:${subscriptionId}`);

/** The log event id of a packed group of steps: the same steps recorded again make the same id, which the log drops. */
export const recordedEventId = (steps: readonly { readonly type: string; readonly data: JsonObject }[]): string =>
  hex32(steps.map(({ type, data }) => `${String(data['delivery_id'])}:${type}:${String(data['round'] ?? 1)}:${String(data['attempt'] ?? 0)}`).join(','));

/** A subscription's delivery history: one stream, deleted with the subscription. */
export const deliveryStream = (subscriptionId: string): string => `deliveries-${subscriptionId}`;

export const subscriptionOfStream = (stream: string): string | null => (stream.startsWith('deliveries-') ? stream.slice('deliveries-'.length) : null);
