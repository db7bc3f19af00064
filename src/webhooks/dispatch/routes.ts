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
import { boundedInt, decode } from '../../http/validation.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../subscriptions.js';
import type { Dispatcher } from './dispatcher.js';

const DeliveryQuery = t.partial({
  status: t.keyof({ waiting: null, delivered: null, failed: null, cancelled: null }),
  page: boundedInt(1, 1_000_000),
  page_size: boundedInt(1, 100),
});

const micros = (value: number | null): string | null => (value === null ? null : isoMicros(value));

export const deliveryView = (d: Delivery) => ({
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
