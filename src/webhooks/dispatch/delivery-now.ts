// Deliveries as the log has them now, read from the delivery-history index and the records the index
// had not applied yet when it was read (a few, while it keeps up), never the subscription's whole
// history: one for a manual retry on an API server and a dispatcher taking over a delivery it did not
// hold; several for a replay looking up each page of events; a replay's waiting for their first
// attempt, by which it paces itself; all those waiting, a page at a time, for a deactivation.
import { DELIVERY_RECORD_TYPES, deliveryAggregate, unpackSteps, type Delivery } from '../../domain/delivery/delivery.js';
import { deliveryStream } from '../../domain/delivery/ids.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';
import type { DeliveryAsOf, DeliveryHistoryReader, HistoryKey, WaitingReader } from '../../../projections/deliveries-index.js';

/** Undefined when the index does not have it (unknown, or past retention); `position` is the last record folded in. */
export const deliveryNow = async (history: DeliveryHistoryReader, log: EventLog, subscriptionId: string, deliveryId: string): Promise<DeliveryAsOf | undefined> => {
  const indexed = await history.get(subscriptionId, deliveryId);
  if (indexed === undefined) return undefined;
  const stream = deliveryStream(subscriptionId);
  const since = (await log.readAll({ after: indexed.position, types: DELIVERY_RECORD_TYPES })).filter((event) => event.stream === stream);
  const steps = since.flatMap(unpackSteps).filter((step) => step.data['delivery_id'] === deliveryId);
  return { delivery: steps.reduce(deliveryAggregate.evolve, indexed.delivery) ?? indexed.delivery, position: since.at(-1)?.position ?? indexed.position };
};

type Step = ReturnType<typeof unpackSteps>[number];
/** Each delivery's steps in records read from the stream, with the record's log position, in order. */
type StepsById = ReadonlyMap<string, readonly { readonly position: number; readonly step: Step }[]>;

const stepsById = (records: readonly RecordedEvent[]): StepsById => {
  const steps = new Map<string, { position: number; step: Step }[]>();
  for (const record of records) {
    for (const step of unpackSteps(record)) {
      const id = String(step.data['delivery_id']);
      const listed = steps.get(id);
      if (listed === undefined) steps.set(id, [{ position: record.position, step }]);
      else listed.push({ position: record.position, step });
    }
  }
  return steps;
};

/** Each of `deliveryIds` as the index read it (`indexed`, in the same order), with the steps recorded after that row folded on top. */
const foldedOnto = (deliveryIds: readonly string[], indexed: readonly (DeliveryAsOf | undefined)[], steps: StepsById): Map<string, Delivery> => {
  const found = new Map<string, Delivery>();
  deliveryIds.forEach((id, i) => {
    const asOf = indexed[i];
    let delivery = asOf?.delivery ?? null;
    for (const { position, step } of steps.get(id) ?? []) if (position > (asOf?.position ?? 0)) delivery = deliveryAggregate.evolve(delivery, step) ?? delivery;
    if (delivery !== null) found.set(id, delivery);
  });
  return found;
};

/**
 * Those of `deliveryIds` the subscription has, each as the log has it now: also the ones recorded
 * after what the index applied (a replay's own, recorded a moment before its driver stopped). Absent:
 * unknown, or pruned from the index past the retention.
 */
export const deliveriesNow = async (
  index: DeliveryHistoryReader & Pick<WaitingReader, 'appliedOf'>,
  log: EventLog,
  subscriptionId: string,
  deliveryIds: readonly string[],
): Promise<Map<string, Delivery>> => {
  // What the index applied is asked first: what it applies after shows in the reads of the
  // deliveries, and what it had not applied yet is in the stream's records read after them.
  const { revision } = await index.appliedOf(subscriptionId);
  const indexed = await Promise.all(deliveryIds.map((id) => index.get(subscriptionId, id)));
  const since = await log.readStream(deliveryStream(subscriptionId), revision + 1);
  return foldedOnto(deliveryIds, indexed, stepsById(since));
};

/**
 * The subscription's waiting deliveries, at most `size` at a time, however many: first those the
 * stream's records after what the index applied touch (a few, while it keeps up), as the log has them
 * now, then the others from the index's pages of waiting ones, newest first. What is recorded while
 * the pages are read may not show: a delivery settled meanwhile may come as waiting (cancelling it
 * again changes nothing), one scheduled meanwhile may not come.
 */
export async function* waitingNow(
  index: DeliveryHistoryReader & Pick<WaitingReader, 'appliedOf'>,
  log: EventLog,
  subscriptionId: string,
  size: number,
): AsyncGenerator<readonly Delivery[]> {
  const { revision } = await index.appliedOf(subscriptionId);
  // Read once: an index far behind (rebuilding) leaves many records; read again for each page, they cost the square of their number.
  const steps = stepsById(await log.readStream(deliveryStream(subscriptionId), revision + 1));
  const touched = [...steps.keys()];
  for (let i = 0; i < touched.length; i += size) {
    const ids = touched.slice(i, i + size);
    const found = foldedOnto(ids, await Promise.all(ids.map((id) => index.get(subscriptionId, id))), steps);
    yield [...found.values()].filter((delivery) => delivery.status === 'waiting');
  }
  // The index may have them as they were before those records.
  const answered = new Set(touched);
  for (let after: HistoryKey | null | undefined; after !== null; ) {
    const page = await index.page({ subscriptionId, status: 'waiting', limit: size, ...(after === undefined ? {} : { after }) });
    yield page.items.filter((delivery) => !answered.has(delivery.id));
    after = page.next;
  }
}

/**
 * The replay's deliveries waiting for their first attempt, as the log has them now: the index's, with
 * the stream's records after what it applied folded on top (a few, while it keeps up; the steps its
 * rows already have skipped), and those the records schedule for the replay.
 */
export const replayFirstsNow = async (index: WaitingReader, log: EventLog, subscriptionId: string, replayId: string): Promise<Delivery[]> => {
  // What the index applied is asked first: the records after it are read after the index's rows.
  const { revision } = await index.appliedOf(subscriptionId);
  const firsts = await index.replayFirsts(subscriptionId, replayId);
  const since = await log.readStream(deliveryStream(subscriptionId), revision + 1);
  const steps = stepsById(since);
  // Those the index has, from its rows; those the records schedule for the replay, from their first step.
  const indexed = new Set(firsts.deliveries.map((delivery) => delivery.id));
  const scheduled = [...steps].filter(([id, listed]) => !indexed.has(id) && listed.some(({ step }) => step.data['replay_id'] === replayId)).map(([id]) => id);
  const rows = [...firsts.deliveries.map((delivery) => ({ delivery, position: firsts.position })), ...scheduled.map(() => undefined)];
  const found = foldedOnto([...indexed, ...scheduled], rows, steps);
  return [...found.values()].filter((delivery) => delivery.status === 'waiting' && delivery.round === 1 && delivery.attempt === 0);
};
