// Helpers for the bus tests against the real Kafka that `npm test` starts (KAFKA_BROKERS): without
// it those tests are pending. Topics and groups are random per test so runs never see each other.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Kafka, KafkaMessage } from 'kafkajs';
import { createKafka } from '../../src/bus/kafka.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';

export const brokersFromEnv = (): string[] | null => process.env['KAFKA_BROKERS']?.split(',') ?? null;

/** The Kafka of the test run, or marks the suite pending. */
export const requireKafka = (context: Mocha.Context): Kafka => {
  const brokers = brokersFromEnv();
  if (brokers === null) context.skip();
  return createKafka(brokers, `test-${randomId().slice(0, 8)}`);
};

export const uniqueName = (prefix: string): string => `${prefix}-${randomId().slice(0, 12)}`;

export interface TempLog {
  readonly log: SqliteEventLog;
  readonly file: string;
  close(): Promise<void>;
}

export const openTempLog = (): TempLog => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bus-'));
  const file = path.join(dir, 'events.sqlite');
  const log = openSqliteLog({ file });
  return {
    log,
    file,
    async close() {
      await log.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

export type TopicMessage = KafkaMessage & { readonly partition: number };

/** Reads the topic from the beginning with a fresh group until `count` messages arrived (then a short quiet time for extras). */
export const readTopic = async (kafka: Kafka, topic: string, count: number, quietMs = 300, timeoutMs = 15_000): Promise<TopicMessage[]> => {
  const consumer = kafka.consumer({ groupId: uniqueName('reader') });
  const received: TopicMessage[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ partition, message }) => void received.push({ ...message, partition }) });
    const deadline = Date.now() + timeoutMs;
    while (received.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    await new Promise((resolve) => setTimeout(resolve, quietMs));
    return received;
  } finally {
    await consumer.disconnect();
  }
};

export const headerOf = (message: KafkaMessage, name: string): string => String(message.headers?.[name] ?? '');
