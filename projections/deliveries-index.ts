// The delivery-history index port: a projection of the delivery records in the log (the log stays
// their source of truth), kept as they are recorded, so that a page of a subscription's history, by
// status, event type and creation time, costs the page and not the history, and a restarting
// dispatcher reads only the deliveries still waiting. Listing order is newest first by (created_at,
// id); a page ends with the key the next page starts after (cursor pagination, no offsets, no totals).
// Adapters: SQLite beside the log in the embedded mode (deliveries-index-sqlite.ts: written by the
// dispatcher thread, read by the API thread), memory for API servers of the distributed mode and
// tests (deliveries-index-memory.ts). One contract suite runs against each (test/webhooks/delivery-index.contract.ts).
import { deliveryAggregate, unpackSteps, type Delivery, type DeliveryStatus } from '../src/domain/delivery/delivery.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../src/domain/subscription/subscription.js';
import { DELIVERY_RECORD_TYPES } from '../src/domain/delivery/delivery.js';
import { subscriptionOfStream } from '../src/domain/delivery/ids.js';
import type { ProjectedEvent } from './tickets-store.js';

/** Bumped whenever what the index keeps or how it evolves changes: a store of another version is rebuilt from the log. */
export const DELIVERY_INDEX_VERSION = 3;

/** The events the index applies. */
export const DELIVERY_INDEX_TYPES: readonly string[] = [...DELIVERY_RECORD_TYPES, SUBSCRIPTION_EVENTS.deleted];

export interface IndexedDelivery {
  readonly delivery: Delivery;
  readonly workspaceId: string;
}

/** A place in the listing order: pages continue strictly after it. */
export interface HistoryKey {
  readonly createdAt: number;
  readonly id: string;
}

export interface HistoryQuery {
  readonly subscriptionId: string;
  readonly status?: DeliveryStatus;
  readonly eventType?: string;
  /** µs, inclusive. */
  readonly createdFrom?: number;
  /** µs, exclusive. */
  readonly createdBefore?: number;
  /** Newest first: only deliveries listed after this key. */
  readonly after?: HistoryKey;
  readonly limit: number;
}

export interface HistoryPage {
  readonly items: readonly Delivery[];
  /** The last item's key when more deliveries may follow, else null. */
  readonly next: HistoryKey | null;
}

/** A replay's deliveries by status, and how many of them were attempted at least once. */
export type ReplayOutcomes = Readonly<Record<DeliveryStatus | 'attempted', number>>;

export const noDeliveries = (): Record<DeliveryStatus | 'attempted', number> => ({ waiting: 0, delivered: 0, failed: 0, cancelled: 0, attempted: 0 });

export interface DeliveryAsOf {
  readonly delivery: Delivery;
  readonly position: number;
}

/**
 * A subscription's waiting deliveries as of the last record of its delivery stream the index applied:
 * a dispatcher starts its view of them here and reads only the records after `revision`, never the
 * stream from its first record.
 */
export interface WaitingAsOf {
  readonly deliveries: readonly Delivery[];
  /** Null when the index has applied nothing of the stream. */
  readonly workspaceId: string | null;
  /** The stream revision of the last record applied, -1 when none. */
  readonly revision: number;
  /** That record's log position, 0 when none. */
  readonly position: number;
}

/** What waitingOf answers for a stream of which the index has applied nothing (or nothing since it began keeping streams). */
export const NOTHING_APPLIED: WaitingAsOf = { deliveries: [], workspaceId: null, revision: -1, position: 0 };

/** How far the index has applied a subscription's delivery stream, and how many of its deliveries wait. */
export interface StreamApplied {
  /** -1 when none. */
  readonly revision: number;
  readonly waiting: number;
}

/** A replay's deliveries waiting for their first attempt, with the log position the index had applied when it read them. */
export interface ReplayFirsts {
  readonly deliveries: readonly Delivery[];
  readonly position: number;
}

/** What a dispatcher reads of a subscription's waiting deliveries (src/webhooks/dispatch/waiting.ts). */
export interface WaitingReader {
  /** In one read: the waiting deliveries and the stream revision they are as of (NOTHING_APPLIED when it knows of no record of the stream). */
  waitingOf(subscriptionId: string): Promise<WaitingAsOf>;
  /** A cheap look (no delivery read): whether starting again from waitingOf beats reading the stream on. */
  appliedOf(subscriptionId: string): Promise<StreamApplied>;
  /**
   * In one read: the replay's deliveries that wait and were never attempted (a replay paces itself
   * by them, a few), never the subscription's other waiting ones, however many.
   */
  replayFirsts(subscriptionId: string, replayId: string): Promise<ReplayFirsts>;
}

export interface DeliveryHistoryReader {
  page(query: HistoryQuery): Promise<HistoryPage>;
  /**
   * One delivery of the subscription (undefined when unknown or pruned), with the log position the
   * index had applied when it was read: the records after it may have changed it since.
   */
  get(subscriptionId: string, deliveryId: string): Promise<DeliveryAsOf | undefined>;
  /** How many of a replay's deliveries are in each status, and were attempted (those past retention no longer count). */
  replayOutcomes(subscriptionId: string, replayId: string): Promise<ReplayOutcomes>;
  close(): Promise<void>;
}

export interface IndexCheckpoint {
  /** Log position of the last event applied (0: none). */
  readonly position: number;
  /** The highest `fanned_out_through` of the deliveries scheduled (the embedded fan-out's restart point). */
  readonly fannedOutThrough: number;
}

export interface PendingDeliveries {
  /** The deliveries still waiting, and any of events after `fannedOutThrough` (a replayed fan-out finds them known). */
  readonly deliveries: readonly IndexedDelivery[];
  readonly fannedOutThrough: number;
}

/** The same as PendingDeliveries, read a page at a time as it is iterated: a restart's take-over never holds a backlog of millions at once. */
export interface PendingPages {
  readonly deliveries: AsyncIterable<IndexedDelivery>;
  readonly fannedOutThrough: number;
}

/** Everything `pages` gives, each delivery once (a source may give one twice). */
export const pendingWhole = async ({ deliveries, fannedOutThrough }: PendingPages): Promise<PendingDeliveries> => {
  const byId = new Map<string, IndexedDelivery>();
  for await (const indexed of deliveries) byId.set(indexed.delivery.id, indexed);
  return { deliveries: [...byId.values()], fannedOutThrough };
};

/** A delivery named by its subscription and id. */
export interface DeliveryKey {
  readonly subscriptionId: string;
  readonly deliveryId: string;
}

export interface DeliveryIndex extends DeliveryHistoryReader, WaitingReader {
  /**
   * Whether the index has each delivery (of that subscription), in the order asked, in one read: a
   * fan-out asks this of an event's deliveries at once, not one round trip per subscription.
   */
  has(keys: readonly DeliveryKey[]): Promise<readonly boolean[]>;
  checkpoint(): Promise<IndexCheckpoint>;
  /** Applies one event of DELIVERY_INDEX_TYPES, in log order; one at or below the checkpoint changes nothing. */
  apply(event: ProjectedEvent): Promise<void> | void;
  pending(): Promise<PendingDeliveries>;
  /**
   * The same, read about `pageSize` at a time as they are iterated. Each page is a read of its own: a
   * delivery settled meanwhile may be left out, none waiting throughout is; one may come twice.
   */
  pendingPages(pageSize: number): Promise<PendingPages>;
  /**
   * Drops up to `limit` settled deliveries created before `before` (µs) and says how many went. What a
   * restart needs stays: waiting deliveries, and those of events past the fan-out checkpoint (a
   * replayed fan-out must find them known, or it would deliver them again).
   */
  prune(before: number, limit: number): Promise<number>;
  /** Drops a deleted subscription's history (its deletion marker may be gone from the log before the runner reads it). */
  forget(subscriptionId: string): Promise<void>;
  /** Drops everything and the checkpoint (the index was built from another log). */
  clear(): Promise<void>;
}

/** The last record of a subscription's delivery stream an index applied (kept per subscription, for waitingOf). */
export interface AppliedRecord {
  readonly subscriptionId: string;
  readonly revision: number;
  readonly position: number;
  readonly workspaceId: string;
}

/**
 * What one event changes: the deliveries it touched as they are now and the stream record it is (null
 * outside a delivery stream), or a deleted subscription's whole history.
 */
export type IndexChange =
  | { readonly kind: 'deliveries'; readonly deliveries: readonly IndexedDelivery[]; readonly fannedOutThrough: number; readonly applied: AppliedRecord | null }
  | { readonly kind: 'subscription_deleted'; readonly subscriptionId: string };

/**
 * The change an event makes, given the deliveries as the index has them. A step of a delivery the
 * index does not have (pruned by retention) changes nothing: its history is past retention.
 */
export const indexChange = (event: ProjectedEvent, current: (deliveryId: string) => Delivery | undefined): IndexChange => {
  if (event.type === SUBSCRIPTION_EVENTS.deleted) return { kind: 'subscription_deleted', subscriptionId: event.stream.slice(subscriptionStream('').length) };
  const touched = new Map<string, Delivery>();
  let fannedOutThrough = 0;
  for (const step of unpackSteps(event)) {
    const id = String(step.data['delivery_id']);
    const before = touched.get(id) ?? current(id) ?? null;
    const after = deliveryAggregate.evolve(before, step);
    if (after !== null && after !== before) touched.set(id, after);
    if (step.type === 'delivery.scheduled') fannedOutThrough = Math.max(fannedOutThrough, Number(step.data['fanned_out_through']));
  }
  const subscriptionId = subscriptionOfStream(event.stream);
  const applied = subscriptionId === null ? null : { subscriptionId, revision: event.revision, position: event.position, workspaceId: event.workspaceId };
  return { kind: 'deliveries', deliveries: [...touched.values()].map((delivery) => ({ delivery, workspaceId: event.workspaceId })), fannedOutThrough, applied };
};

/** Whether `a` is listed before `b` (newest first, then by id). */
export const listedBefore = (a: HistoryKey, b: HistoryKey): boolean => a.createdAt > b.createdAt || (a.createdAt === b.createdAt && a.id > b.id);

export const keyOf = (delivery: Delivery): HistoryKey => ({ createdAt: delivery.createdAt, id: delivery.id });
