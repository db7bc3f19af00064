// What the log has of a subscription beyond the directory row a dispatcher holds: the row's directory
// (another thread's or process's tail) may have missed a deletion or not applied a rotation yet, so
// the log decides before anything is sent. Read from the row's own revision on: the stream grows with
// every failure counted, and a look must not cost its whole history.
// The attempts one turn of the event loop starts share a look per subscription row (`sharedPerTurn`):
// the pump starts up to its whole window at once, and on a log that another connection commits to,
// each read costs SQLite a re-read of the pages it walks (its page cache is dropped at every foreign
// commit). A look shared that way is no older than the turn, as each attempt's own look taken at its
// start would be.
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

/** A look at the log, and when it was taken (performance.now() before the read: it is at least that fresh). */
export interface Look {
  readonly logged: Awaited<ReturnType<typeof loggedSince>>;
  readonly at: number;
}

/** `loggedSince`, read once per subscription row per turn of the event loop, and again within a turn that outlasts `maxAgeMs`. */
export const sharedPerTurn = (log: EventLog, maxAgeMs: number): ((row: SubscriptionRow) => Promise<Look>) => {
  const looks = new Map<string, { readonly at: number; readonly look: Promise<Look> }>();
  return (row) => {
    const key = `${row.id}\0${row.revision}`;
    const now = performance.now();
    const shared = looks.get(key);
    if (shared !== undefined && now - shared.at <= maxAgeMs) return shared.look;
    if (looks.size === 0) setImmediate(() => looks.clear());
    const look = loggedSince(log, row).then((logged) => ({ logged, at: now }));
    looks.set(key, { at: now, look });
    return look;
  };
};
