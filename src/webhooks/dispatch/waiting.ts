// The waiting deliveries of each subscription as its stream has them, caught up incrementally. With
// a shared schedule every claimed attempt is read back from the log; re-reading and folding the whole
// subscription stream per attempt costs time in the size of its history (quadratic over a burst, and
// it starves the event loop). Only waiting deliveries are kept, so memory follows what is pending.
//
// Where the delivery-history index is at hand (`seeds`), a view starts from it rather than from the
// stream's first record: the subscription's waiting deliveries as of the last record the index
// applied, then the records after it. A view left alone for a while starts again the same way when
// the index says that reads less than catching up would. Reading a stream of tens of thousands of
// records whole held a dispatcher's main thread for seconds (the distributed roles' late minutes).
//
// With the index, a subscription with more than `maxKept` waiting (a receiver down for hours) is not
// kept: the take-overs of its attempts read just the deliveries they take instead (`read` gives
// null), so a dispatcher's memory does not follow a dead receiver's backlog. (A deactivation reads the
// index a page at a time instead, DeliveryRecords.waitingPages; a replay its own deliveries waiting
// for their first attempt, delivery-now.ts replayFirstsNow. Without an index, no view is let go.)
import { performance } from 'node:perf_hooks';
import { deliveryAggregate, unpackSteps, type Delivery } from '../../domain/delivery/delivery.js';
import { deliveryStream } from '../../domain/delivery/ids.js';
import type { EventLog } from '../../log/event-log.js';
import type { WaitingReader } from '../../../projections/deliveries-index.js';

export interface WaitingView {
  readonly deliveries: ReadonlyMap<string, Delivery>;
  /** Null while the stream is empty or gone. */
  readonly workspaceId: string | null;
  /** Log position of the last event read, 0 when none. */
  readonly position: number;
}

export interface WaitingDeliveries {
  /** The subscription's waiting deliveries, caught up with its stream; null when too many to keep (only where the index can be asked): read the one needed instead. */
  read(subscriptionId: string): Promise<WaitingView | null>;
  /** Drops what is known of a deleted subscription. */
  forget(subscriptionId: string): void;
}

interface Cached {
  readonly deliveries: Map<string, Delivery>;
  workspaceId: string | null;
  position: number;
  nextRevision: number;
  /** When it last caught up (performance.now()), null before its first read. */
  caughtUpAt: number | null;
  /** Catch-ups run one at a time per stream, each from where the previous one stopped. */
  tail: Promise<void>;
  /** The catch-up not started yet: readers arriving meanwhile share it (it will see all they need). */
  queued: Promise<void> | null;
}

/** A view caught up within this long only reads on; an older one first asks the index how far behind it is. */
const STALE_MS = 1_000;
/** Waiting deliveries of one subscription kept at most (400–600 bytes each, measured) where the index can be asked instead. */
export const WAITING_KEPT = 10_000;

export const createWaitingDeliveries = (log: EventLog, seeds?: WaitingReader, staleMs = STALE_MS, maxKept = WAITING_KEPT): WaitingDeliveries => {
  const cache = new Map<string, Cached>();
  /** Subscriptions with too many waiting to keep, and when the index last said so (performance.now()). */
  const large = new Map<string, number>();
  /** Whether the last read of the index failed: said once, not at every read while it lasts. */
  let seedFailing = false;

  /** Starts a cold view, or a stale one further behind than what waits, from the index. */
  const startOver = async (index: WaitingReader, subscriptionId: string, cached: Cached): Promise<void> => {
    if (cached.caughtUpAt !== null) {
      if (performance.now() - cached.caughtUpAt < staleMs) return;
      const { revision, waiting } = await index.appliedOf(subscriptionId);
      if (revision + 1 - cached.nextRevision <= waiting) return;
    }
    const seed = await index.waitingOf(subscriptionId);
    // The index has applied no more of the stream than this view has read: reading on is less.
    if (seed.revision < cached.nextRevision) return;
    cached.deliveries.clear();
    for (const delivery of seed.deliveries) cached.deliveries.set(delivery.id, delivery);
    cached.workspaceId = seed.workspaceId;
    cached.position = seed.position;
    cached.nextRevision = seed.revision + 1;
  };

  const catchUp = async (subscriptionId: string, cached: Cached): Promise<void> => {
    if (seeds !== undefined) {
      try {
        await startOver(seeds, subscriptionId, cached);
        seedFailing = false;
      } catch (error) {
        // The log is the source of truth: read on from it, only slower.
        if (!seedFailing) console.warn(`webhook ${subscriptionId}: its waiting deliveries are read from the log, the delivery history index being out of reach:`, error);
        seedFailing = true;
      }
    }
    const events = await log.readStream(deliveryStream(subscriptionId), cached.nextRevision);
    for (const event of events) {
      for (const step of unpackSteps(event)) {
        const id = String(step.data['delivery_id']);
        const next = deliveryAggregate.evolve(cached.deliveries.get(id) ?? null, step);
        if (next?.status === 'waiting') cached.deliveries.set(id, next);
        else cached.deliveries.delete(id);
      }
      cached.workspaceId = event.workspaceId;
      cached.position = event.position;
      cached.nextRevision = event.revision + 1;
    }
    cached.caughtUpAt = performance.now();
  };

  /**
   * Whether a subscription not kept has too many waiting to keep, as the index says (asked again past
   * the stale time; it comes back once under half the bound). An index out of reach says no: the
   * stream is read, as without one.
   */
  const tooMany = async (index: WaitingReader, subscriptionId: string): Promise<boolean> => {
    const judged = large.get(subscriptionId);
    if (judged !== undefined && performance.now() - judged < staleMs) return true;
    const waiting = await index.appliedOf(subscriptionId).then(
      (applied) => applied.waiting,
      () => 0,
    );
    const over = waiting > (judged === undefined ? maxKept : maxKept / 2);
    if (over) large.set(subscriptionId, performance.now());
    else large.delete(subscriptionId);
    return over;
  };

  const read = async (subscriptionId: string): Promise<WaitingView | null> => {
    let cached = cache.get(subscriptionId);
    if (cached === undefined) {
      if (seeds !== undefined && (await tooMany(seeds, subscriptionId))) return null;
      // Another reader may have started one meanwhile.
      cached = cache.get(subscriptionId) ?? { deliveries: new Map(), workspaceId: null, position: 0, nextRevision: 0, caughtUpAt: null, tail: Promise.resolve(), queued: null };
      cache.set(subscriptionId, cached);
    }
    const entry = cached;
    let run = entry.queued;
    if (run === null) {
      run = entry.tail.then(() => {
        entry.queued = null;
        return catchUp(subscriptionId, entry);
      });
      entry.queued = run;
      entry.tail = run.catch(() => undefined);
    }
    await run;
    const view = { deliveries: entry.deliveries, workspaceId: entry.workspaceId, position: entry.position };
    // Grown past the bound (its receiver went down): read this once more, then let go.
    if (seeds !== undefined && entry.deliveries.size > maxKept) {
      if (cache.get(subscriptionId) === entry) cache.delete(subscriptionId);
      large.set(subscriptionId, performance.now());
    }
    return view;
  };

  return {
    read,
    forget(subscriptionId) {
      cache.delete(subscriptionId);
      large.delete(subscriptionId);
    },
  };
};
