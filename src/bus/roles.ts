// What each process role (config.role, env ROLE) runs, for the composition root:
//   all         embedded: every feature; the webhook delivery engine runs in a worker thread of the
//               process, fed by a tail of the log (src/webhooks/dispatch/thread.ts), and the HTTP
//               features record manual retries in the log for it, as the api role does
//   api         every HTTP feature, without the webhook delivery engine (its routes read the delivery
//               history from the index the dispatchers keep in Redis when REDIS_URL is set, else from
//               an index of the log kept in memory, and record manual retries in the log) and the feed
//               publisher
//   relay       the relay log → Kafka (and the EventStoreDB sequencer) and the feed publisher (the one
//               process announcing new offsets to the API servers' long polls), health routes only
//   dispatcher  the webhook delivery engine fed by the Kafka consumer group, with the retry schedule
//               and the delivery-history index shared in Redis when REDIS_URL is set (it restarts from
//               the index; without Redis, from the whole delivery history of the log), health routes only
// Every role serves /healthz and /readyz.
import type { Core, Feature, FeatureFactory } from '../app/core.js';
import { ConfigError, type Config } from '../config/config.js';
import { failureCheck } from '../health/checks.js';
import { checksFor, createHealthFeature, healthFeature } from '../health/feature.js';
import { feedPublisherFeature } from '../updates/feature.js';
import { webhooksWithDelivery, webhooksWithDeliveryFeature } from '../webhooks/dispatch/feature.js';
import { createRedisRetrySchedule } from '../webhooks/dispatch/retry-schedule/redis.js';
import { createRedisReplayLeases } from '../webhooks/dispatch/replay-leases/redis.js';
import { deliveryHistoryFrom, historyFromIndexFile, historyInMemory, historyInRedis } from '../webhooks/dispatch/history.js';
import { sharedHistory } from '../webhooks/dispatch/shared-history.js';
import { createRedisDeletionListener, createRedisDeletionNotices, DELETION_WAIT_MS, type DeletionNotices } from '../webhooks/dispatch/deletion-notices.js';
import { createDispatcherThread } from '../webhooks/dispatch/thread.js';
import { holdForDispatchers, pressApiServers } from '../webhooks/dispatch/backpressure-redis.js';
import { createWebhooksFeature, type WebhookExtension } from '../webhooks/feature.js';
import { createLogCheckpoint } from './checkpoint.js';
import type { CrashOutcome } from './consumer.js';
import { CONSUMER_RIDE_OUT_MS, createKafka } from './kafka.js';
import { createRelay } from './relay.js';
import { createKafkaSource } from './webhook-source.js';

// A claim outlives one attempt (at most the timeout) and its recording; then another dispatcher takes it.
const CLAIM_LEASE_MARGIN_MS = 5_000;

const brokersOf = (config: Config): readonly string[] => {
  if (config.kafkaBrokers === null) throw new ConfigError('KAFKA_BROKERS', `required for ROLE=${config.role}`);
  return config.kafkaBrokers;
};

const relayFeatures = (core: Core): Feature[] => {
  const relay = createRelay({
    log: core.log,
    kafka: createKafka(brokersOf(core.config), 'relay'),
    topic: core.config.kafkaTopic,
    checkpoint: createLogCheckpoint(core.log, core.newId),
  });
  const running = failureCheck('relay', relay.failure);
  return [
    { name: 'relay', start: relay.start, stop: relay.stop },
    feedPublisherFeature(core),
    createHealthFeature([...checksFor(core.config, core.log), running]),
  ];
};

const dispatcherFeatures = (core: Core): Feature[] => {
  const { config } = core;
  const brokers = brokersOf(config);
  // Once kafkajs has stopped the consumer for good, the dispatcher delivers nothing: /readyz says so.
  let stopped: Error | null = null;
  const consuming = failureCheck('kafka consumer', () => stopped);
  const crashes: Record<CrashOutcome, number> = { restarted: 0, started_again: 0, stopped: 0 };
  // A consumer that crashes again and again still answers /readyz: this counts it for an alert.
  const crashCount: Feature = {
    name: 'kafka consumer crashes',
    counts: [
      {
        name: 'kafka_consumer_crashes_total',
        help: 'Crashes of the Kafka consumer since the start, by what followed: kafkajs restarted it, the dispatcher started it again, or it stopped for good (nothing is consumed until a restart).',
        label: 'outcome',
        counts: () => crashes,
      },
    ],
  };
  const bus = {
    kafka: createKafka(brokers, 'dispatcher', CONSUMER_RIDE_OUT_MS),
    brokers,
    topic: config.kafkaTopic,
    group: config.kafkaGroup,
    sessionTimeoutMs: config.kafkaSessionTimeoutMs,
    onStopped: (error: Error) => void (stopped = error),
    onCrash: (outcome: CrashOutcome) => void crashes[outcome]++,
  };
  if (config.redisUrl === null) {
    console.warn('dispatcher without REDIS_URL: its retry schedule is its own, so run only one dispatcher (each would send every retry)');
    const delivery = webhooksWithDelivery(createKafkaSource(bus))(core);
    return [delivery, healthFeature(core, delivery.deliveryEngine, [consuming]), crashCount];
  }
  // A claim outlives one attempt (its send timeout, then recording), so only a dead dispatcher's claims expire.
  const shared = createRedisRetrySchedule({ url: config.redisUrl, leaseMs: 2 * config.webhooks.timeoutMs + CLAIM_LEASE_MARGIN_MS });
  const history = sharedHistory(core, config.redisUrl);
  const leases = createRedisReplayLeases({ url: config.redisUrl, ttlMs: config.webhooks.replayLeaseMs });
  const deletions = createRedisDeletionListener({ url: config.redisUrl });
  const delivery = webhooksWithDelivery(createKafkaSource(bus, history), { shared, records: history.records, leases, deletions })(core);
  return [history.feature, delivery, pressApiServers(core, config.redisUrl, delivery), healthFeature(core, delivery.deliveryEngine, [consuming]), crashCount];
};

/** A DELETE answers once the dispatchers have stopped sending to the subscription (src/webhooks/dispatch/deletion-notices.ts). */
const tellDispatchers =
  (url: string): WebhookExtension =>
  (core, { beforeDeleteAnswered }) => {
    let notices: DeletionNotices | null = null;
    beforeDeleteAnswered.push(async (subscriptionId) => notices?.tell(subscriptionId));
    return {
      start: async () => void (notices = createRedisDeletionNotices({ url, waitMs: DELETION_WAIT_MS })),
      stop: async () => notices?.close(),
    };
  };

/**
 * The API servers' webhooks: delivery history from the index in Redis the dispatchers keep (REDIS_URL),
 * else from an index of the log in memory; manual retries recorded in the log for the dispatchers,
 * deletions told to them (REDIS_URL: without it there is at most one dispatcher, which meets them in the log).
 */
const webhooksFromLog: FeatureFactory = (core) =>
  createWebhooksFeature(
    core,
    core.config.redisUrl === null
      ? [deliveryHistoryFrom(historyInMemory)]
      : [deliveryHistoryFrom(historyInRedis), tellDispatchers(core.config.redisUrl), holdForDispatchers(core.config.redisUrl)],
  );

/** The embedded features with the webhooks feature of a server whose delivery engine runs elsewhere. */
const withoutDelivery = (core: Core, embedded: readonly FeatureFactory[], webhooks: FeatureFactory = webhooksFromLog): Feature[] =>
  embedded.map((make) => (make === webhooksWithDeliveryFeature ? webhooks : make)(core));

/** The features the configured role runs; `embedded` is the full list of the `all` role. */
export const roleFeatures = (core: Core, embedded: readonly FeatureFactory[]): Feature[] => {
  switch (core.config.role) {
    case 'all': {
      // Started last, once the main side is ready; stopped first, before the log closes.
      const thread = createDispatcherThread(core.config);
      const webhooks: FeatureFactory = (c) => createWebhooksFeature(c, [deliveryHistoryFrom(historyFromIndexFile), thread.forwardDeletions, thread.holdWrites]);
      const health = createHealthFeature([...checksFor(core.config, core.log), thread.check], { delivery: { engine: thread.engine, core } });
      return [...withoutDelivery(core, embedded, webhooks), health, thread.feature];
    }
    case 'api':
      return [...withoutDelivery(core, embedded), healthFeature(core)];
    case 'relay':
      return relayFeatures(core);
    case 'dispatcher':
      return dispatcherFeatures(core);
  }
};
