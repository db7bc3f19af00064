// The kafkajs client and the topic of envelopes, shared by the relay, the dispatchers and /readyz.
import { Kafka, logLevel, type Admin } from 'kafkajs';

/** Partitions of the topic when the relay creates it: the most dispatchers that can share the work. */
export const TOPIC_PARTITIONS = 12;

/**
 * How long a dispatcher's consumer keeps retrying a broker it cannot reach. One that gave up (after
 * about 6 s by default) joined its group again as a new member once the broker was back, and the
 * group handed out no partition until the old member's session had expired: 27 s after the broker
 * was back with the default 30 s session. A member that kept retrying resumed within a second, even
 * after an outage longer than its session (a broker that loads a group gives its members a fresh one).
 */
export const CONSUMER_RIDE_OUT_MS = 60_000;

/** `rideOutMs`: how long the client keeps retrying a broker it cannot reach (about 6 s without it). */
export const createKafka = (brokers: readonly string[], clientId: string, rideOutMs?: number): Kafka =>
  new Kafka({
    clientId,
    brokers: [...brokers],
    // kafkajs logs every connection failure at ERROR while it retries; we report what gives up.
    logLevel: logLevel.NOTHING,
    // With the cap, retries after the first three (0.2 + 0.4 + 0.8 s) come a second apart.
    retry: rideOutMs === undefined ? { initialRetryTime: 200, retries: 5 } : { initialRetryTime: 200, maxRetryTime: 1000, retries: 3 + Math.ceil(rideOutMs / 1000) },
  });

/** Kafka did not answer a process's start: said in one line (what failed to connect), not as kafkajs's chain of errors. */
export class KafkaUnavailable extends Error {}

/** Network failures at the bottom of kafkajs's errors: the broker list points nowhere, or Kafka is down. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ECONNRESET']);

/** Runs a start's first talk with Kafka; a failure to reach it becomes a KafkaUnavailable naming the cause. */
export const reaching = async <T>(work: () => Promise<T>): Promise<T> => {
  try {
    return await work();
  } catch (error) {
    let cause: unknown = error;
    while (cause instanceof Error && cause.cause instanceof Error) cause = cause.cause;
    const code = (cause as { code?: unknown } | null)?.code;
    if (cause instanceof Error && ((typeof code === 'string' && UNREACHABLE.has(code)) || cause.name === 'KafkaJSConnectionError')) {
      throw new KafkaUnavailable(`Kafka does not answer (KAFKA_BROKERS): ${cause.message}`, { cause: error });
    }
    throw error;
  }
};

/** Creates the topic unless it exists (several processes may race to; the loser sees it exists). */
export const ensureTopic = async (kafka: Kafka, topic: string, partitions = TOPIC_PARTITIONS): Promise<void> => {
  const admin: Admin = kafka.admin();
  await admin.connect();
  try {
    const topics = await admin.listTopics();
    if (!topics.includes(topic)) await admin.createTopics({ topics: [{ topic, numPartitions: partitions }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
};
