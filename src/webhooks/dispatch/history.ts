// The delivery history as the log has it, for servers without a dispatcher (ROLE=api): the routes
// read it as everywhere, and a manual retry is validated against it and recorded in it as the same
// step a dispatcher records; the dispatchers pick the request up from the log (src/bus/webhook-source.ts).
import { left, right } from 'fp-ts/lib/Either.js';
import { deliveryAggregate, foldDeliveries, packSteps } from '../../domain/delivery/delivery.js';
import { deliveryStream, recordedEventId } from '../../domain/delivery/ids.js';
import { domainError } from '../../domain/errors.js';
import type { MicrosClock } from '../../log/clock.js';
import type { EventLog } from '../../log/event-log.js';
import type { WebhookExtension } from '../feature.js';
import type { Dispatcher } from './dispatcher.js';
import { deliveryRoutes } from './routes.js';

/**
 * Same answers as the dispatcher's retry. Idempotent by delivery id and round: the step's log event id
 * is derived from them, so a concurrent request for the same round is dropped by the log.
 */
export const recordRetryRequest =
  (log: EventLog, clock: MicrosClock): Dispatcher['retry'] =>
  async (subscription, deliveryId) => {
    const delivery = foldDeliveries(await log.readStream(deliveryStream(subscription.id))).get(deliveryId);
    if (delivery === undefined) return null;
    // As the dispatcher: a waiting delivery is refused as such before the subscription's state is looked at.
    if (delivery.status !== 'waiting' && !subscription.isActive) {
      return left(domainError('CONFLICT', 'Webhook is inactive: activate it first', { webhook_id: subscription.id }));
    }
    const result = deliveryAggregate.decide({ kind: 'retry', at: clock() }, delivery);
    if (result._tag === 'Left') return result;
    const packed = packSteps(result.right);
    await log.append(deliveryStream(subscription.id), [{ id: recordedEventId(result.right), type: packed.type, workspaceId: subscription.workspaceId, data: packed.data }], 'any');
    return right(result.right.reduce(deliveryAggregate.evolve, delivery) ?? delivery);
  };

/**
 * The delivery routes of the webhooks feature on a server without a dispatcher. A deleted
 * subscription's history goes here too: a dispatcher tailing the log from another connection may
 * miss the deletion marker, which the DELETE removes with the subscription's stream a moment later
 * (its dispatcher deletes the history as well when it sees it; deleting twice is harmless).
 */
export const deliveryHistoryFromLog: WebhookExtension = (core, { directory }) => {
  directory.onDeleted((row) => {
    core.log.deleteStream(deliveryStream(row.id)).catch((error: unknown) => console.error(`webhook ${row.id}: deleting its delivery history:`, error));
  });
  return { routes: deliveryRoutes({ log: core.log, subscriptions: directory, dispatcher: { retry: recordRetryRequest(core.log, core.clock) } }) };
};
