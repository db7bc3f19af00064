// How events reach the webhook dispatcher in distributed mode: from the Kafka topic instead of a tail
// of the log. Same shape as the embedded LogTail (src/webhooks/dispatch/log-tail.ts), so the delivery
// engine is built the same way with either. Kafka's committed offsets are the fan-out checkpoint: at
// start every delivery in the log is known, so an event handed over again after a crash or a
// rebalance finds its deliveries recorded and fans out to nobody twice. Deactivations and manual
// retries recorded by the API servers still come from the log (internal events, never on the topic).
import type { Kafka } from 'kafkajs';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../domain/subscription/subscription.js';
import { DELIVERY_RECORDED, unpackSteps } from '../domain/delivery/delivery.js';
import { subscriptionOfStream } from '../domain/delivery/ids.js';
import type { LogSubscription, RecordedEvent } from '../log/event-log.js';
import type { Dispatcher } from '../webhooks/dispatch/dispatcher.js';
import type { LogTail, LogTailOptions } from '../webhooks/dispatch/log-tail.js';
import { readDeliveryHistory } from '../webhooks/dispatch/restore.js';
import { createBusConsumer } from './consumer.js';

export interface KafkaSourceOptions {
  readonly kafka: Kafka;
  readonly topic: string;
  readonly group: string;
  readonly retryDelayMs?: number;
  readonly sessionTimeoutMs?: number;
}

/** The step of a manual retry (src/domain/delivery/delivery.ts). */
const RETRY_REQUESTED = 'delivery.retry_requested';

/** Deactivations, and the manual retries API servers record in the delivery history (src/webhooks/dispatch/history.ts). */
const fromLog =
  (dispatcher: Dispatcher) =>
  async (event: RecordedEvent): Promise<void> => {
    if (event.type === SUBSCRIPTION_EVENTS.deactivated) return dispatcher.subscriptionDeactivated(event.stream.slice(subscriptionStream('').length), event.position);
    const subscriptionId = subscriptionOfStream(event.stream);
    if (subscriptionId === null) return;
    for (const step of unpackSteps(event)) {
      if (step.type === RETRY_REQUESTED) await dispatcher.retryRequested(subscriptionId, String(step.data['delivery_id']), Number(step.data['round']));
    }
  };

export const createKafkaSource =
  (bus: KafkaSourceOptions) =>
  ({ log, subscriptions, dispatcher }: LogTailOptions): LogTail => {
    const consumer = createBusConsumer({
      ...bus,
      async handle(record) {
        // Subscriptions created before the event must be known before it fans out.
        await subscriptions.waitFor(record.position);
        await dispatcher.fanOut(record);
      },
    });
    let internal: LogSubscription | null = null;
    return {
      async start() {
        // From before the history is read: what is recorded meanwhile is taken up twice, harmlessly, never missed.
        const after = await log.headPosition();
        const history = await readDeliveryHistory(log);
        await dispatcher.resume(history.deliveries, 0);
        internal = log.subscribe({ after, types: [SUBSCRIPTION_EVENTS.deactivated, DELIVERY_RECORDED] }, fromLog(dispatcher));
        internal.done.catch((error: unknown) => console.error('webhook deactivations and retry requests stopped:', error));
        await consumer.start();
      },
      async stop() {
        await consumer.stop();
        await internal?.stop();
      },
    };
  };
