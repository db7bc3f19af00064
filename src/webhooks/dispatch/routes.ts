// Documented extensions of the webhook API: a subscription's delivery history, and a manual retry of
// a failed or cancelled delivery. Both answer 404 (short form) for another project's subscription.
// The history is read from the delivery-history index (projections/deliveries-index.ts), a page at a
// time with an opaque cursor: a page costs the same at ten deliveries and at millions.
import type { Either } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import type { Delivery } from '../../domain/delivery/delivery.js';
import type { DomainError } from '../../domain/errors.js';
import { isoMicros } from '../../domain/envelope.js';
import { business, invalid, notFound } from '../../http/api-error.js';
import type { ApiRouter, RouteModule } from '../../http/app.js';
import type { ApiContext } from '../../http/context.js';
import { describedAs } from '../../http/json-schema.js';
import { answer, refusal, type Operation } from '../../http/operations.js';
import { boundedInt, decode, text } from '../../http/validation.js';
import type { DeliveryHistoryReader, HistoryKey } from '../../../projections/deliveries-index.js';
import { webhookNotFound } from '../routes.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../subscriptions.js';

const ISO = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(Z|[+-]\d\d:\d\d)?$/;

/** An ISO 8601 instant to µs since the epoch (microseconds kept); without an offset it is UTC, as the API writes its own. */
export const instant = describedAs(
  new t.Type<number, number, unknown>(
  'ISO 8601 timestamp',
  (u): u is number => typeof u === 'number',
  (u, c) => {
    const match = typeof u === 'string' ? ISO.exec(u.trim()) : null;
    const millis = match === null ? Number.NaN : Date.parse(`${match[1]}${match[3] === undefined || match[3] === 'Z' ? 'Z' : match[3]}`);
    if (match === null || Number.isNaN(millis)) return t.failure(u, c, 'Input should be an ISO 8601 timestamp such as 2026-11-21T22:47:15.123456+00:00');
    return t.success(millis * 1000 + Number((match[2] ?? '').padEnd(6, '0')));
  },
  (n) => n,
  ),
  { type: 'string', format: 'date-time' },
);

const Status = t.keyof({ waiting: null, delivered: null, failed: null, cancelled: null });
const DeliveryQuery = t.partial({
  status: Status,
  event_type: text(100),
  created_from: instant,
  created_before: instant,
  cursor: text(200),
  page_size: boundedInt(1, 100),
});

/** The cursor names its subscription and the last delivery listed: base64url of JSON. */
const cursorOf = (subscriptionId: string, key: HistoryKey): string => Buffer.from(JSON.stringify([subscriptionId, key.createdAt, key.id])).toString('base64url');

const badCursor = (msg: string) => invalid([{ type: 'value_error', loc: ['query', 'cursor'], msg }]);

/** The key a cursor continues after; 422 for one that is not a cursor or belongs to another subscription's listing. */
const keyOfCursor = (cursor: string, subscriptionId: string): HistoryKey => {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = null;
  }
  if (!Array.isArray(parsed) || parsed.length !== 3 || typeof parsed[0] !== 'string' || !Number.isSafeInteger(parsed[1]) || typeof parsed[2] !== 'string') {
    throw badCursor('Not a cursor of this listing: pass next_cursor from a previous page unchanged');
  }
  if (parsed[0] !== subscriptionId) throw badCursor("The cursor belongs to another webhook's delivery history");
  return { createdAt: parsed[1] as number, id: parsed[2] };
};

const micros = (value: number | null): string | null => (value === null ? null : isoMicros(value));

const nullableStr = t.union([t.string, t.null]);
const DeliveryView = t.type({
  id: t.string,
  event_id: t.string,
  event_type: t.string,
  /** The replay that sent it (null: the live delivery). */
  replay_id: nullableStr,
  status: Status,
  round: t.number,
  attempt: t.number,
  next_attempt_at: nullableStr,
  created_at: t.string,
  attempts: t.array(
    t.type({ round: t.number, attempt: t.number, delivered: t.boolean, status_code: t.union([t.number, t.null]), error: nullableStr, latency_ms: t.number, attempted_at: t.string }),
  ),
});

const DeliveryPage = t.type({ items: t.array(DeliveryView), page_size: t.number, next_cursor: t.union([t.string, t.null]) });

const operations: readonly Operation[] = [
  {
    method: 'get',
    path: '/webhooks/:webhook_id/deliveries',
    summary: "A subscription's deliveries, newest first, with every attempt",
    query: DeliveryQuery,
    answers: [answer(200, 'A page of deliveries; pass next_cursor back as cursor for the next', DeliveryPage), webhookNotFound],
  },
  {
    method: 'post',
    path: '/webhooks/:webhook_id/deliveries/:delivery_id/retry',
    summary: 'A new round of attempts for a failed or cancelled delivery, with the same delivery id',
    answers: [answer(202, 'The delivery, waiting', DeliveryView), refusal(404, 'short', 'Webhook or delivery not found (or past the history retention)'), refusal(409, 'business', 'CONFLICT: the delivery is waiting or delivered, or the subscription is inactive')],
  },
];

export const deliveryView = (d: Delivery): t.TypeOf<typeof DeliveryView> => ({
  id: d.id,
  event_id: d.eventId,
  event_type: d.eventType,
  replay_id: d.replayId,
  status: d.status,
  round: d.round,
  attempt: d.attempt,
  next_attempt_at: micros(d.nextAttemptAt),
  created_at: isoMicros(d.createdAt),
  attempts: d.history.map((a) => ({
    round: a.round,
    attempt: a.attempt,
    delivered: a.delivered,
    status_code: a.statusCode,
    error: a.error,
    latency_ms: a.latencyMs,
    attempted_at: isoMicros(a.attemptedAt),
  })),
});

/** Manual retry of a failed or cancelled delivery: a new round of attempts, the first one now. Null when there is no such delivery (or it is past retention). */
export type RetryDelivery = (subscription: SubscriptionRow, deliveryId: string) => Promise<Either<DomainError, Delivery> | null>;

/** The subscription of the path's :webhook_id in the caller's workspace; 404 for any other. */
export const webhookOfPath = (subscriptions: SubscriptionDirectory, ctx: ApiContext): SubscriptionRow => {
  const row = subscriptions.get(ctx.state.workspace.id, String(ctx.params['webhook_id']));
  if (row === undefined) throw notFound('Webhook');
  return row;
};

/** `retry`: a request recorded in the log for the dispatchers (history.ts). */
export const deliveryRoutes = (deps: { history: DeliveryHistoryReader; subscriptions: SubscriptionDirectory; retry: RetryDelivery }): RouteModule => {
  const subscriptionOf = (ctx: ApiContext): SubscriptionRow => webhookOfPath(deps.subscriptions, ctx);

  return {
    operations,
    api(router: ApiRouter) {
      router.get('/webhooks/:webhook_id/deliveries', async (ctx) => {
        const query = decode(DeliveryQuery, ctx.query, 'query');
        const subscription = subscriptionOf(ctx);
        const pageSize = query.page_size ?? 20;
        const page = await deps.history.page({
          subscriptionId: subscription.id,
          limit: pageSize,
          ...(query.status === undefined ? {} : { status: query.status }),
          ...(query.event_type === undefined ? {} : { eventType: query.event_type }),
          ...(query.created_from === undefined ? {} : { createdFrom: query.created_from }),
          ...(query.created_before === undefined ? {} : { createdBefore: query.created_before }),
          ...(query.cursor === undefined ? {} : { after: keyOfCursor(query.cursor, subscription.id) }),
        });
        ctx.body = { items: page.items.map(deliveryView), page_size: pageSize, next_cursor: page.next === null ? null : cursorOf(subscription.id, page.next) };
      });

      router.post('/webhooks/:webhook_id/deliveries/:delivery_id/retry', async (ctx) => {
        const subscription = subscriptionOf(ctx);
        const result = await deps.retry(subscription, String(ctx.params['delivery_id']));
        if (result === null) throw notFound('Delivery');
        if (result._tag === 'Left') throw business(result.left);
        ctx.status = 202;
        ctx.body = deliveryView(result.right);
      });
    },
  };
};
