// How events reach the webhook dispatcher in distributed mode: from the Kafka topic instead of a tail
// of the log. Same shape as the embedded LogTail (src/webhooks/dispatch/log-tail.ts), so the delivery
// engine is built the same way with either. Kafka's committed offsets are the fan-out checkpoint, so
// a delivery record's `fanned_out_through` is its own event's position. An event handed over again
// after a crash or a rebalance must find its deliveries recorded: with the delivery-history index
// (REDIS_URL) the dispatcher asks it (DeliveryRecords.recorded), once the index has applied what the
// log held when the partitions were assigned (what the member that had them recorded is in the log by
// then), and a start takes over only what is waiting, while it consumes; without it, a start reads
// every delivery of the log and remembers them all before it consumes. Deactivations
// and manual retries recorded by the API servers still come from the log (internal events, never on
// the topic).
import type { Kafka } from 'kafkajs';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../domain/subscription/subscription.js';
import { DELIVERY_RETRY_REQUESTED } from '../domain/delivery/delivery.js';
import type { LogSubscription, RecordedEvent } from '../log/event-log.js';
import type { Dispatcher } from '../webhooks/dispatch/dispatcher.js';
import type { LogTail, LogTailOptions } from '../webhooks/dispatch/log-tail.js';
import { readDeliveryHistory, type DeliveryHistory } from '../webhooks/dispatch/restore.js';
import { takeUpRetryRequests } from '../webhooks/dispatch/retry-requests.js';
import { takeOverMeanwhile, type TakeOver } from '../webhooks/dispatch/take-over.js';
import { createBusConsumer, type CrashOutcome } from './consumer.js';

export interface KafkaSourceOptions {
  readonly kafka: Kafka;
  readonly brokers: readonly string[];
  readonly topic: string;
  readonly group: string;
  readonly retryDelayMs?: number;
  readonly sessionTimeoutMs?: number;
  readonly onStopped?: (error: Error) => void;
  readonly onCrash?: (outcome: CrashOutcome) => void;
}

/** Deactivations, and the manual retries API servers record in the delivery history (src/webhooks/dispatch/history.ts). */
const fromLog = (dispatcher: Dispatcher) => {
  const retryRequests = takeUpRetryRequests(dispatcher);
  return async (event: RecordedEvent): Promise<void> => {
    if (event.type === SUBSCRIPTION_EVENTS.deactivated) return dispatcher.subscriptionDeactivated(event.stream.slice(subscriptionStream('').length), event.position);
    return retryRequests(event);
  };
};

/** Every delivery of the log, each one remembered (none is past a fan-out checkpoint the log does not know). */
const wholeHistory = async (log: LogTailOptions['log']): Promise<DeliveryHistory> => ({ ...(await readDeliveryHistory(log)), fannedOutThrough: 0 });

/** The delivery-history index, as a dispatcher fed by Kafka needs it. */
export interface IndexedHistory {
  /** What a start takes over, read once the index has caught up with the log. */
  readonly restore: () => Promise<DeliveryHistory>;
  /** Resolves once the index has applied every delivery record the log holds now. */
  readonly caughtUp: () => Promise<void>;
}

/**
 * `indexed`: the delivery-history index (default: none; a start reads the whole delivery history of
 * the log). With the index, an event handed over again finds its deliveries there, not among those
 * the take-over remembers: the take-over goes on while events are consumed (at hundreds of thousands
 * waiting it takes seconds), started again from a new read should it fail part way. After each join
 * of the group, nothing fans out until the index has applied what the log held at the join: it
 * applies a moment behind the log, and the events a rebalance hands over again are the newest.
 */
export const createKafkaSource =
  (bus: KafkaSourceOptions, indexed?: IndexedHistory) =>
  ({ log, subscriptions, dispatcher }: LogTailOptions): LogTail => {
    /** The index catching up with the log as it was at the last join; null once it has. */
    let joined: Promise<void> | null = null;
    const onJoined = (): void => {
      if (indexed === undefined) return;
      const caughtUp: Promise<void> = indexed.caughtUp().then(
        () => {
          if (joined === caughtUp) joined = null;
        },
        (error: unknown) => {
          // The index thread is gone (its dispatcher ends): the index is asked as it is.
          console.error('webhook dispatcher: the delivery history index did not catch up after a join of the group:', error);
          if (joined === caughtUp) joined = null;
        },
      );
      joined = caughtUp;
    };
    const consumer = createBusConsumer({
      ...bus,
      onJoined,
      async handle(record) {
        // Subscriptions created before the event must be known before it fans out.
        await subscriptions.waitFor(record.position);
        if (joined !== null) await joined;
        await dispatcher.fanOut(record, record.position);
      },
    });
    let internal: LogSubscription | null = null;
    let takeOver: TakeOver | null = null;
    return {
      async start() {
        // From before the history is read: what is recorded meanwhile is taken up twice, harmlessly, never missed.
        const after = await log.headPosition();
        if (indexed === undefined) {
          const history = await wholeHistory(log);
          await dispatcher.resume(history.deliveries, history.fannedOutThrough);
        } else {
          takeOver = takeOverMeanwhile(dispatcher, await indexed.restore(), indexed.restore);
        }
        internal = log.subscribe({ after, types: [SUBSCRIPTION_EVENTS.deactivated, DELIVERY_RETRY_REQUESTED] }, fromLog(dispatcher));
        internal.done.catch((error: unknown) => console.error('webhook deactivations and retry requests stopped:', error));
        await consumer.start();
      },
      async stop() {
        const stopping = takeOver?.stop();
        await consumer.stop();
        await internal?.stop();
        await stopping;
      },
    };
  };
