// The kafkajs client and the topic of envelopes, shared by the relay, the dispatchers and /readyz.
import { Kafka, logLevel, type Admin } from 'kafkajs';

/** Partitions of the topic when the relay creates it: the most dispatchers that can share the work. */
export const TOPIC_PARTITIONS = 12;

export const createKafka = (brokers: readonly string[], clientId: string): Kafka =>
  new Kafka({
    clientId,
    brokers: [...brokers],
    // kafkajs logs every connection failure at ERROR while it retries; we report what gives up.
    logLevel: logLevel.NOTHING,
    retry: { initialRetryTime: 200, retries: 5 },
  });

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
