// Manual retries recorded in the log by a process without the dispatcher (src/webhooks/dispatch/history.ts:
// an API server, or the embedded main thread whose dispatcher runs in a worker thread), taken up by the
// dispatchers that tail the log for them.
import { DELIVERY_RETRY_REQUESTED } from '../../domain/delivery/delivery.js';
import { subscriptionOfStream } from '../../domain/delivery/ids.js';
import type { LogSubscription, RecordedEvent } from '../../log/event-log.js';
import type { Dispatcher } from './dispatcher.js';
import type { EventSource } from './feature.js';
import type { LogTail } from './log-tail.js';

/** Hands a manual retry request recorded in the log (a DELIVERY_RETRY_REQUESTED event) to the dispatcher; ignores anything else. */
export const takeUpRetryRequests =
  (dispatcher: Pick<Dispatcher, 'takeUp'>) =>
  async (event: RecordedEvent): Promise<void> => {
    const subscriptionId = subscriptionOfStream(event.stream);
    if (subscriptionId === null || event.type !== DELIVERY_RETRY_REQUESTED) return;
    await dispatcher.takeUp(subscriptionId, String(event.data['delivery_id']), Number(event.data['round']));
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
        requests = options.log.subscribe({ after, types: [DELIVERY_RETRY_REQUESTED] }, takeUpRetryRequests(options.dispatcher));
        requests.done.catch((error: unknown) => console.error('webhook retry requests stopped:', error));
      },
      async stop() {
        await requests?.stop();
        await tail.stop();
      },
    } satisfies LogTail;
  };
