// One delivery as the log has it now, read from the delivery-history index and the records the index
// had not applied yet when it was read (a few, while it keeps up), never the subscription's whole
// history: for a manual retry on an API server and a dispatcher taking over a delivery it did not hold.
import { DELIVERY_RECORD_TYPES, deliveryAggregate, unpackSteps } from '../../domain/delivery/delivery.js';
import { deliveryStream } from '../../domain/delivery/ids.js';
import type { EventLog } from '../../log/event-log.js';
import type { DeliveryAsOf, DeliveryHistoryReader } from '../../../projections/deliveries-index.js';

/** Undefined when the index does not have it (unknown, or past retention); `position` is the last record folded in. */
export const deliveryNow = async (history: DeliveryHistoryReader, log: EventLog, subscriptionId: string, deliveryId: string): Promise<DeliveryAsOf | undefined> => {
  const indexed = await history.get(subscriptionId, deliveryId);
  if (indexed === undefined) return undefined;
  const stream = deliveryStream(subscriptionId);
  const since = (await log.readAll({ after: indexed.position, types: DELIVERY_RECORD_TYPES })).filter((event) => event.stream === stream);
  const steps = since.flatMap(unpackSteps).filter((step) => step.data['delivery_id'] === deliveryId);
  return { delivery: steps.reduce(deliveryAggregate.evolve, indexed.delivery) ?? indexed.delivery, position: since.at(-1)?.position ?? indexed.position };
};
