// Deterministic ids, so a fan-out replayed after a crash lands on the same delivery (same
// X-Webhook-Id), and a repeated record of the same steps is dropped by the log.
//
// Each id starts with a time: a delivery's with its event id's first 12 hex (its milliseconds, see
// src/shared/ids.ts), a packed record's with its first delivery's. The delivery index and the log
// index these ids; ids that grow with time land on those indexes' last pages, which a commit's rows
// share, where a hash alone lands each on a random page (`npm run bench -- index-growth`: the
// embedded index's cost per delivery rose 1.5× over a million deliveries with hashed ids, flat with
// ordered ones). The other 20 hex (80 bits) are a hash of what makes the id.
import { createHash } from 'node:crypto';
import type { JsonObject } from '../../log/event-log.js';

const hex = (text: string): string => createHash('sha256').update(text).digest('hex');
const TIME_PREFIX = /^[0-9a-f]{12}/;
/** `digest`'s first 20 hex behind a time: `from`'s first 12 hex (an event id's milliseconds), or the digest's next 12 for an id of another shape. */
const timed = (from: string, digest: string): string => `${TIME_PREFIX.test(from) ? from.slice(0, 12) : digest.slice(20, 32)}${digest.slice(0, 20)}`;

/**
 * The id a delivery had before ids started with a time (the hash alone). A dispatcher handed an
 * event again (Kafka) looks for its deliveries under this id too: a dispatcher of an older release
 * may have recorded them before it died.
 */
export const legacyDeliveryIdOf = (eventId: string, subscriptionId: string): string => hex(`delivery:${eventId}:${subscriptionId}`).slice(0, 32);

/** The X-Webhook-Id: one per (event, subscription), the same in every attempt (the older id's hash behind the event's time). */
export const deliveryIdOf = (eventId: string, subscriptionId: string): string => timed(eventId, legacyDeliveryIdOf(eventId, subscriptionId));

/** The id a replayed delivery had before ids started with a time: a replay an older release drove is continued looking for both. */
export const legacyReplayDeliveryIdOf = (eventId: string, subscriptionId: string, replayId: string): string => hex(`replay:${replayId}:${eventId}:${subscriptionId}`).slice(0, 32);

/** A replayed delivery's X-Webhook-Id: one per (event, subscription, replay). */
export const replayDeliveryIdOf = (eventId: string, subscriptionId: string, replayId: string): string => timed(eventId, legacyReplayDeliveryIdOf(eventId, subscriptionId, replayId));

/** The log event id of a packed group of steps: the same steps recorded again make the same id, which the log drops. */
export const recordedEventId = (steps: readonly { readonly type: string; readonly data: JsonObject }[]): string =>
  timed(
    String(steps[0]?.data['delivery_id'] ?? ''),
    hex(steps.map(({ type, data }) => `${String(data['delivery_id'])}:${type}:${String(data['round'] ?? 1)}:${String(data['attempt'] ?? 0)}`).join(',')),
  );

/** A subscription's delivery history: one stream, deleted with the subscription. */
export const deliveryStream = (subscriptionId: string): string => `deliveries-${subscriptionId}`;

export const subscriptionOfStream = (stream: string): string | null => (stream.startsWith('deliveries-') ? stream.slice('deliveries-'.length) : null);
