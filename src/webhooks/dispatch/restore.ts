// Reads the delivery history back from the log at start: the deliveries (to reschedule those still
// waiting) and the fan-out checkpoint derived from it, the highest `fanned_out_through` recorded.
import { DELIVERY_RECORD_TYPES, deliveryAggregate, unpackSteps, type Delivery } from '../../domain/delivery/delivery.js';
import { eachEvent } from '../../log/each-event.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';
import type { RestoredDelivery } from './dispatcher.js';

export interface DeliveryHistory {
  /** Read as they are iterated, where the source pages them (a restart's take-over from the embedded index). */
  readonly deliveries: Iterable<RestoredDelivery> | AsyncIterable<RestoredDelivery>;
  readonly fannedOutThrough: number;
}

export const readDeliveryHistory = async (log: EventLog, pageSize = 10_000): Promise<DeliveryHistory & { readonly deliveries: readonly RestoredDelivery[] }> => {
  const deliveries = new Map<string, { delivery: Delivery; workspaceId: string }>();
  let fannedOutThrough = 0;
  const visit = (event: RecordedEvent): void => {
    for (const step of unpackSteps(event)) {
      const id = String(step.data['delivery_id']);
      const delivery = deliveryAggregate.evolve(deliveries.get(id)?.delivery ?? null, step);
      if (delivery !== null) deliveries.set(id, { delivery, workspaceId: event.workspaceId });
      if (step.type === 'delivery.scheduled') fannedOutThrough = Math.max(fannedOutThrough, Number(step.data['fanned_out_through']));
    }
  };
  await eachEvent(log, { after: 0, types: DELIVERY_RECORD_TYPES }, visit, pageSize);
  return { deliveries: [...deliveries.values()], fannedOutThrough };
};
