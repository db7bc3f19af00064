// A delivery's steps as the aggregate decides them, with the states they lead to: what a dispatcher
// would record, for tests that build delivery streams or feed an index by hand.
import type { Decided } from '../../src/domain/aggregate.js';
import { deliveryAggregate, type Delivery, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';

export interface ScheduleOptions {
  readonly eventType?: string;
  readonly at?: number;
  readonly eventPosition?: number;
  readonly fannedOutThrough?: number;
  readonly replayId?: string;
}

/** `t0` (µs): when deliveries are scheduled unless told; attempts, cancels and retries come just after. */
export const deliverySteps = (t0: number) => {
  const states = new Map<string, Delivery>();
  const decide = (id: string, command: DeliveryCommand): Decided[] => {
    const result = deliveryAggregate.decide(command, states.get(id) ?? null);
    if (result._tag === 'Left') throw new Error(result.left.message);
    const next = result.right.reduce(deliveryAggregate.evolve, states.get(id) ?? null);
    if (next !== null) states.set(id, next);
    return [...result.right];
  };
  return {
    states,
    schedule: (subscriptionId: string, id: string, options: ScheduleOptions = {}) =>
      decide(id, {
        kind: 'schedule',
        deliveryId: id,
        subscriptionId,
        eventId: `event-${id}`,
        eventType: options.eventType ?? 'ticket.created',
        eventPosition: options.eventPosition ?? 1,
        fannedOutThrough: options.fannedOutThrough ?? 0,
        ...(options.replayId === undefined ? {} : { replayId: options.replayId }),
        at: options.at ?? t0,
      }),
    /** One attempt: delivered, failed for good (no retry left), or failed with a retry due (only the first attempt has one). */
    attempt: (id: string, outcome: 'delivered' | 'failed' | 'retry', at = t0 + 1) =>
      decide(id, {
        kind: 'record_attempt',
        attempt: (states.get(id)?.attempt ?? 0) + 1,
        outcome: { delivered: outcome === 'delivered', statusCode: outcome === 'delivered' ? 200 : 500, error: outcome === 'delivered' ? null : 'http 500', latencyMs: 3 },
        at,
        retryDelaysMs: outcome === 'retry' ? [30] : [],
      }),
    cancel: (id: string) => decide(id, { kind: 'cancel', reason: 'subscription_inactive', at: t0 + 2 }),
    retry: (id: string) => decide(id, { kind: 'retry', at: t0 + 3 }),
  };
};
