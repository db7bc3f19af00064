// Proves the local engines started by scripts/redis.sh and scripts/kafka.sh serve real round trips.
// Without REDIS_URL / KAFKA_BROKERS the tests stay pending, so a missing engine is never a pass.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';

const redisUrl = process.env['REDIS_URL'] || undefined;
const kafkaBrokers = process.env['KAFKA_BROKERS'] || undefined;

describe('local engines (e2e)', () => {
  if (redisUrl === undefined) {
    it('Redis: SET then GET returns the value (set REDIS_URL)');
  } else {
    it('Redis: SET then GET returns the value', async () => {
      const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
      try {
        await redis.connect();
        const key = `engines-e2e:${randomUUID()}`;
        await redis.set(key, 'round trip', 'EX', 60);
        expect(await redis.get(key)).to.equal('round trip');
      } finally {
        redis.disconnect();
      }
    });
  }

  if (kafkaBrokers === undefined) {
    it('Kafka: a consumer group receives the 10 produced messages (set KAFKA_BROKERS)');
  } else {
    it('Kafka: a consumer group receives the 10 produced messages', async () => {
      const kafka = new Kafka({ clientId: 'engines-e2e', brokers: kafkaBrokers.split(','), logLevel: logLevel.NOTHING });
      const topic = `engines-e2e-${randomUUID()}`;
      const sent = Array.from({ length: 10 }, (_, i) => `message ${i}`);
      const received: string[] = [];
      const admin = kafka.admin();
      const producer = kafka.producer();
      const consumer = kafka.consumer({ groupId: `${topic}-group` });
      try {
        await admin.connect();
        await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true });
        await producer.connect();
        await producer.send({ topic, messages: sent.map((value, i) => ({ key: `key-${i % 3}`, value })) });

        let allReceived!: () => void;
        const done = new Promise<void>((resolve) => (allReceived = resolve));
        await consumer.connect();
        await consumer.subscribe({ topic, fromBeginning: true });
        await consumer.run({
          eachMessage: async ({ message }) => {
            received.push(message.value?.toString() ?? '');
            if (received.length >= sent.length) allReceived();
          },
        });
        await done;
        expect([...received].sort()).to.deep.equal([...sent].sort());
      } finally {
        await consumer.disconnect();
        await producer.disconnect();
        await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
        await admin.disconnect();
      }
    });
  }
});
