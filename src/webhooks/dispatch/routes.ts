// Documented extensions of the webhook API: a subscription's delivery history, and a manual retry of
// a failed or cancelled delivery. Both answer 404 (short form) for another project's subscription.
import * as t from 'io-ts';
import type { Delivery } from '../../domain/delivery/delivery.js';
import { foldDeliveries } from '../../domain/delivery/delivery.js';
import { deliveryStream } from '../../domain/delivery/ids.js';
import { isoMicros } from '../../domain/envelope.js';
import type { EventLog } from '../../log/event-log.js';
import { business, notFound } from '../../http/api-error.js';
import type { ApiRouter, RouteModule } from '../../http/app.js';
import type { ApiContext } from '../../http/context.js';
import { answer, refusal, type Operation } from '../../http/operations.js';
import { boundedInt, decode } from '../../http/validation.js';
import { PageOf } from '../../tickets/views.js';
import { webhookNotFound } from '../routes.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../subscriptions.js';
import type { Dispatcher } from './dispatcher.js';

const Status = t.keyof({ waiting: null, delivered: null, failed: null, cancelled: null });
const DeliveryQuery = t.partial({
  status: Status,
  page: boundedInt(1, 1_000_000),
  page_size: boundedInt(1, 100),
});

const micros = (value: number | null): string | null => (value === null ? null : isoMicros(value));

const nullableStr = t.union([t.string, t.null]);
const DeliveryView = t.type({
  id: t.string,
  event_id: t.string,
  event_type: t.string,
  status: Status,
  round: t.number,
  attempt: t.number,
  next_attempt_at: nullableStr,
  created_at: t.string,
  attempts: t.array(
    t.type({ round: t.number, attempt: t.number, delivered: t.boolean, status_code: t.union([t.number, t.null]), error: nullableStr, latency_ms: t.number, attempted_at: t.string }),
  ),
});

const operations: readonly Operation[] = [
  {
    method: 'get',
    path: '/webhooks/:webhookId/deliveries',
    summary: "A subscription's deliveries, newest first, with every attempt",
    query: DeliveryQuery,
    answers: [answer(200, 'A page of deliveries', PageOf(DeliveryView)), webhookNotFound],
  },
  {
    method: 'post',
    path: '/webhooks/:webhookId/deliveries/:deliveryId/retry',
    summary: 'A new round of attempts for a failed or cancelled delivery, with the same delivery id',
    answers: [answer(202, 'The delivery, waiting', DeliveryView), refusal(404, 'short', 'Webhook or delivery not found'), refusal(409, 'business', 'CONFLICT: the delivery is waiting or delivered, or the subscription is inactive')],
  },
];

export const deliveryView = (d: Delivery): t.TypeOf<typeof DeliveryView> => ({
  id: d.id,
  event_id: d.eventId,
  event_type: d.eventType,
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

/** `dispatcher.retry`: the in-process dispatcher's, or a request recorded in the log for the dispatchers (history.ts). */
export const deliveryRoutes = (deps: { log: EventLog; subscriptions: SubscriptionDirectory; dispatcher: Pick<Dispatcher, 'retry'> }): RouteModule => {
  const subscriptionOf = (ctx: ApiContext): SubscriptionRow => {
    const row = deps.subscriptions.get(ctx.state.workspace.id, String(ctx.params['webhookId']));
    if (row === undefined) throw notFound('Webhook');
    return row;
  };

  return {
    operations,
    api(router: ApiRouter) {
      router.get('/webhooks/:webhookId/deliveries', async (ctx) => {
        const query = decode(DeliveryQuery, ctx.query, 'query');
        const subscription = subscriptionOf(ctx);
        const page = query.page ?? 1;
        const pageSize = query.page_size ?? 20;
        const all = [...foldDeliveries(await deps.log.readStream(deliveryStream(subscription.id))).values()].reverse();
        const selected = query.status === undefined ? all : all.filter((d) => d.status === query.status);
        ctx.body = { items: selected.slice((page - 1) * pageSize, page * pageSize).map(deliveryView), page, page_size: pageSize, total: selected.length };
      });

      router.post('/webhooks/:webhookId/deliveries/:deliveryId/retry', async (ctx) => {
        const subscription = subscriptionOf(ctx);
        const result = await deps.dispatcher.retry(subscription, String(ctx.params['deliveryId']));
        if (result === null) throw notFound('Delivery');
        if (result._tag === 'Left') throw business(result.left);
        ctx.status = 202;
        ctx.body = deliveryView(result.right);
      });
    },
  };
};
