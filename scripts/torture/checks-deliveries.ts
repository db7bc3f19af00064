// Deliveries against the feed. Every delivery to a known subscription is signed with its secret,
// carries the event exactly as /updates serves it (less the offset), of a type the subscription asked
// for, under one X-Webhook-Id per event and subscription. Every public event from a subscription's
// start on reaches it while it is not deleted, at least once. Nothing arrives after a DELETE was
// answered, give or take DELIVERY_GRACE_MS for a request the dispatcher had already started; a
// delivery counts as arrived at the earliest the receiver may have had it (the receiver's thread
// measures how far behind it ran, and a host busier than its cores leaves it behind now and then).
import { isDeepStrictEqual } from 'node:util';
import { verifySignature } from '../../src/webhooks/signature.js';
import type { FeedItem } from './feed.js';
import { note, type Findings } from './findings.js';
import type { Workspace } from './ledger.js';
import type { Delivery, Subscription } from './webhooks.js';

/**
 * A request the service started before it answered the DELETE may arrive a little after the answer
 * (same host; measured: all came before it, see latest_delivery_after_delete_ms). Shorter than a
 * retry delay plus an attempt, so a retry the DELETE failed to cancel is caught.
 */
export const DELIVERY_GRACE_MS = 250;

const header = (d: Delivery, name: string) => String(d.request.headers[name] ?? '');

const matches = (sub: Subscription, type: string) => sub.events.length === 0 || sub.events.includes(type);

/** The subscriptions whose every matching event from their start on must arrive. */
const expecting = (subs: readonly Subscription[]) => subs.filter((s) => s.secret !== null && s.fromOffset !== null && s.deleteSentAt === null);

/** (label, event id) pairs answered 2xx by the receiver. */
const deliveredPairs = (deliveries: readonly Delivery[]) => {
  const pairs = new Set<string>();
  for (const d of deliveries) if (d.status < 300) pairs.add(`${d.label}/${eventIdOf(d) ?? ''}`);
  return pairs;
};

const eventIdOf = (d: Delivery): string | undefined => {
  try {
    return String(JSON.parse(d.request.body.toString('utf8')).id);
  } catch {
    return undefined;
  }
};

/** The (subscription, event) pairs still to arrive. */
export const missingDeliveries = (subs: readonly Subscription[], deliveries: readonly Delivery[], feeds: ReadonlyMap<Workspace, readonly FeedItem[]>) => {
  const delivered = deliveredPairs(deliveries);
  const missing: { sub: Subscription; item: FeedItem }[] = [];
  for (const sub of expecting(subs)) {
    for (const item of feeds.get(sub.workspace) ?? []) {
      if (item.offset >= (sub.fromOffset ?? Infinity) && matches(sub, item.type) && !delivered.has(`${sub.label}/${item.id}`)) missing.push({ sub, item });
    }
  }
  return missing;
};

export interface DeliveryFigures {
  /** Deliveries of a pair after one was answered 2xx (allowed: at least once). */
  readonly duplicates: number;
  /** The latest arrival after a DELETE's answer, grace or not (ms; negative when all came before). */
  readonly latestAfterDelete: number;
  /** Deliveries to subscriptions whose create was not answered (no secret to check them with). */
  readonly unchecked: number;
}

export const checkDeliveries = (subs: readonly Subscription[], deliveries: readonly Delivery[], feeds: ReadonlyMap<Workspace, readonly FeedItem[]>, f: Findings): DeliveryFigures => {
  const byLabel = new Map(subs.map((s) => [s.label, s]));
  const items = new Map([...feeds.values()].flat().map((item) => [item.id, item]));
  const webhookIds = new Map<string, string>();
  const answered = new Set<string>();
  let duplicates = 0;
  let unchecked = 0;
  let latestAfterDelete = -Infinity;
  for (const d of deliveries) {
    const sub = byLabel.get(d.label);
    const eventId = eventIdOf(d) ?? '?';
    const pair = `${d.label}/${eventId}`;
    const bad = (what: string) => note(f, 'bad_deliveries', `${pair}@${d.at}`, `${pair} (attempt ${header(d, 'x-webhook-attempt')}): ${what}`);
    // The earliest it may have arrived: the receiver's thread may not have run when it did.
    const arrived = d.at - d.lagMs;
    if (sub?.deletedAt != null) latestAfterDelete = Math.max(latestAfterDelete, arrived - sub.deletedAt);
    if (sub?.deletedAt != null && arrived > sub.deletedAt + DELIVERY_GRACE_MS) {
      const tries = sub.deleteTries.join('; ');
      const lag = d.lagMs > 0 ? ` (read ${d.at - sub.deletedAt} ms after, the receiver's thread ${d.lagMs} ms behind)` : '';
      note(f, 'deliveries_after_delete', `${pair}@${d.at}`, `${pair} (attempt ${header(d, 'x-webhook-attempt')}): arrived ${arrived - sub.deletedAt} ms after the DELETE of ${sub.id} was answered${lag} (its tries: ${tries})`);
    }
    if (sub === undefined || sub.secret === null) {
      unchecked += 1;
      continue;
    }
    if (answered.has(pair)) duplicates += 1;
    if (d.status < 300) answered.add(pair);
    if (!verifySignature(sub.secret, d.request.body, header(d, 'x-webhook-signature'))) bad('X-Webhook-Signature does not verify with its secret');
    const item = items.get(eventId);
    if (item === undefined || item.raw['workspace_id'] !== sub.workspace.id) bad('not an event of its workspace in /updates');
    else {
      const { offset: _offset, ...envelope } = item.raw;
      if (!isDeepStrictEqual(JSON.parse(d.request.body.toString('utf8')), envelope)) bad('the body differs from the /updates item');
      if (!matches(sub, item.type)) bad(`a ${item.type}, which the subscription did not ask for`);
      if (header(d, 'x-webhook-event') !== item.type) bad(`X-Webhook-Event ${header(d, 'x-webhook-event')} for a ${item.type}`);
    }
    const webhookId = header(d, 'x-webhook-id');
    if ((webhookIds.get(pair) ?? webhookId) !== webhookId) bad(`X-Webhook-Id ${webhookId}, earlier ${webhookIds.get(pair)}`);
    webhookIds.set(pair, webhookId);
  }
  for (const { sub, item } of missingDeliveries(subs, deliveries, feeds)) {
    note(f, 'lost_deliveries', `${sub.label}/${item.id}`, `${sub.label} (${sub.id}): ${item.type} ${item.id} at offset ${item.offset} never delivered`);
  }
  return { duplicates, unchecked, latestAfterDelete };
};
