// A dispatcher's take-over the test lets go a delivery at a time, and a dispatcher that records what
// it is handed: for the event sources that take a backlog over while the engine runs
// (src/webhooks/dispatch/take-over.ts).
import type { Delivery } from '../../src/domain/delivery/delivery.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { Dispatcher, RestoredDelivery } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DeliveryHistory } from '../../src/webhooks/dispatch/restore.js';
import { deliverySteps } from './delivery-steps.js';

/** `count` waiting deliveries of one subscription, each handed over once `release` was called as many times; the first read fails at `failAt` when given. */
export const gatedTakeOver = (workspaceId: string, subscriptionId: string, count: number, failAt?: number) => {
  const steps = deliverySteps(Date.now() * 1000);
  const waiting = Array.from({ length: count }, (_, i) => {
    steps.schedule(subscriptionId, `d${i}`);
    return steps.states.get(`d${i}`) as Delivery;
  });
  let allowed = 0;
  let wake: () => void = () => undefined;
  let reads = 0;
  const read = async (): Promise<DeliveryHistory> => {
    reads += 1;
    const failing = reads === 1 ? failAt : undefined;
    async function* deliveries(): AsyncGenerator<RestoredDelivery> {
      for (let i = 0; i < count; i++) {
        while (allowed <= i) await new Promise<void>((resolve) => (wake = resolve));
        if (i === failing) throw new Error('the index went away');
        yield { delivery: waiting[i] as Delivery, workspaceId };
      }
    }
    return { deliveries: deliveries(), fannedOutThrough: 0 };
  };
  return {
    read,
    reads: () => reads,
    release(n = 1) {
      allowed += n;
      wake();
    },
  };
};

/** A dispatcher that records the events it fans out and each delivery it takes over, and does nothing else. */
export const recordingDispatcher = (): { readonly dispatcher: Dispatcher; readonly fannedOut: string[]; readonly resumed: string[] } => {
  const fannedOut: string[] = [];
  const resumed: string[] = [];
  const dispatcher = {
    fanOut: async (event: RecordedEvent) => void fannedOut.push(event.id),
    async resume(restored: AsyncIterable<RestoredDelivery>) {
      for await (const { delivery } of restored) resumed.push(delivery.id);
    },
  } as unknown as Dispatcher;
  return { dispatcher, fannedOut, resumed };
};
