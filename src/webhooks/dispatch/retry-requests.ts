// Manual retries recorded in the log by a process without the dispatcher (src/webhooks/dispatch/history.ts:
// an API server, or the embedded main thread whose dispatcher runs in a worker thread), taken up by the
// dispatchers that tail the log for them.
import { DELIVERY_RECORDED, unpackSteps } from '../../domain/delivery/delivery.js';
import { subscriptionOfStream } from '../../domain/delivery/ids.js';
import type { LogSubscription, RecordedEvent } from '../../log/event-log.js';
import type { Dispatcher } from './dispatcher.js';
import type { EventSource } from './feature.js';
import type { LogTail } from './log-tail.js';

/** The step of a manual retry (src/domain/delivery/delivery.ts). */
const RETRY_REQUESTED = 'delivery.retry_requested';

/** Hands each manual retry request of a delivery history event to the dispatcher; ignores the other steps. */
export const takeUpRetryRequests =
  (dispatcher: Pick<Dispatcher, 'retryRequested'>) =>
  async (event: RecordedEvent): Promise<void> => {
    const subscriptionId = subscriptionOfStream(event.stream);
    if (subscriptionId === null) return;
    for (const step of unpackSteps(event)) {
      if (step.type === RETRY_REQUESTED) await dispatcher.retryRequested(subscriptionId, String(step.data['delivery_id']), Number(step.data['round']));
    }
  };

/**
 * `source` that also takes up the manual retries recorded in the log from the head it had before it
 * started (and so before it read the delivery history): a request recorded meanwhile is taken up
 * twice, harmlessly (idempotent by delivery id and round), never missed.
 */
export const withRetryRequests =
  (source: EventSource): EventSource =>
  (options) => {
    const tail = source(options);
    let requests: LogSubscription | null = null;
    return {
      async start() {
        const after = await options.log.headPosition();
        await tail.start();
        requests = options.log.subscribe({ after, types: [DELIVERY_RECORDED] }, takeUpRetryRequests(options.dispatcher));
        requests.done.catch((error: unknown) => console.error('webhook retry requests stopped:', error));
      },
      async stop() {
        await requests?.stop();
        await tail.stop();
      },
    } satisfies LogTail;
  };
