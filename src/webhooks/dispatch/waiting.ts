// The waiting deliveries of each subscription as its stream has them, caught up incrementally. With
// a shared schedule every claimed attempt is read back from the log; re-reading and folding the whole
// subscription stream per attempt costs time in the size of its history (quadratic over a burst, and
// it starves the event loop). Only waiting deliveries are kept, so memory follows what is pending.
import { deliveryAggregate, unpackSteps, type Delivery } from '../../domain/delivery/delivery.js';
import { deliveryStream } from '../../domain/delivery/ids.js';
import type { EventLog } from '../../log/event-log.js';

export interface WaitingView {
  readonly deliveries: ReadonlyMap<string, Delivery>;
  /** Null while the stream is empty or gone. */
  readonly workspaceId: string | null;
  /** Log position of the last event read, 0 when none. */
  readonly position: number;
}

export interface WaitingDeliveries {
  /** The subscription's waiting deliveries, caught up with its stream. */
  read(subscriptionId: string): Promise<WaitingView>;
  /** Drops what is known of a deleted subscription. */
  forget(subscriptionId: string): void;
}

interface Cached {
  readonly deliveries: Map<string, Delivery>;
  workspaceId: string | null;
  position: number;
  nextRevision: number;
  /** Catch-ups run one at a time per stream, each from where the previous one stopped. */
  tail: Promise<void>;
  /** The catch-up not started yet: readers arriving meanwhile share it (it will see all they need). */
  queued: Promise<void> | null;
}

export const createWaitingDeliveries = (log: EventLog): WaitingDeliveries => {
  const cache = new Map<string, Cached>();

  const catchUp = async (subscriptionId: string, cached: Cached): Promise<void> => {
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
  };

  return {
    async read(subscriptionId) {
      let cached = cache.get(subscriptionId);
      if (cached === undefined) {
        cached = { deliveries: new Map(), workspaceId: null, position: 0, nextRevision: 0, tail: Promise.resolve(), queued: null };
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
      return { deliveries: entry.deliveries, workspaceId: entry.workspaceId, position: entry.position };
    },
    forget: (subscriptionId) => void cache.delete(subscriptionId),
  };
};
