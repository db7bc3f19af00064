// What the log has of a subscription beyond the directory row a dispatcher holds: the row's directory
// (another thread's or process's tail) may have missed a deletion or not applied a rotation yet, so
// the log decides before anything is sent. Read from the row's own revision on: the stream grows with
// every failure counted, and a look must not cost its whole history.
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../domain/subscription/subscription.js';
import type { EventLog } from '../../log/event-log.js';
import type { SubscriptionRow } from '../subscriptions.js';

/** 'gone' when the row's own event is missing (the stream was deleted) or a deletion followed it; else the position of the last event after it, null when none. */
export const loggedSince = async (log: EventLog, row: SubscriptionRow): Promise<'gone' | { readonly newerThrough: number | null }> => {
  const events = await log.readStream(subscriptionStream(row.id), row.revision);
  const newer = events.filter((event) => event.revision > row.revision);
  if (events[0]?.revision !== row.revision || newer.some((event) => event.type === SUBSCRIPTION_EVENTS.deleted || event.type === SUBSCRIPTION_EVENTS.abandoned)) return 'gone';
  return { newerThrough: newer.at(-1)?.position ?? null };
};
