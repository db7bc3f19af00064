// How events reach the webhook dispatcher in distributed mode: from the Kafka topic instead of a tail
// of the log. Same shape as the embedded LogTail (src/webhooks/dispatch/log-tail.ts), so the delivery
// engine is built the same way with either. Kafka's committed offsets are the fan-out checkpoint: at
// start every delivery in the log is known, so an event handed over again after a crash or a
// rebalance finds its deliveries recorded and fans out to nobody twice. Deactivations still come
// from the log (they are internal events, never on the topic).
import type { Kafka } from 'kafkajs';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../domain/subscription/subscription.js';
import type { LogSubscription } from '../log/event-log.js';
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
    let deactivations: LogSubscription | null = null;
    return {
      async start() {
        const history = await readDeliveryHistory(log);
        await dispatcher.resume(history.deliveries, 0);
        const prefix = subscriptionStream('');
        deactivations = log.subscribe({ after: await log.headPosition(), types: [SUBSCRIPTION_EVENTS.deactivated] }, (event) =>
          dispatcher.subscriptionDeactivated(event.stream.slice(prefix.length), event.position),
        );
        deactivations.done.catch((error: unknown) => console.error('webhook deactivations stopped:', error));
        await consumer.start();
      },
      async stop() {
        await consumer.stop();
        await deactivations?.stop();
      },
    };
  };
