// Helpers for the bus tests against the real Kafka that `npm test` starts (KAFKA_BROKERS): without
// it those tests are pending. Topics and groups are random per test so runs never see each other.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
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

/**
 * A kafkajs consumer of `group` in a process of its own, to kill without a word (SIGKILL) or to keep
 * as a member the group's others must agree with; resolves its member id once it has joined.
 * `assigner` renames its partition assigner (kafkajs's round robin), which no other member then shares.
 */
export const ghost = async (
  brokers: readonly string[],
  topic: string,
  group: string,
  options: { readonly sessionTimeoutMs: number; readonly assigner?: string },
): Promise<{ child: ChildProcess; memberId: string }> => {
  const script = `
    const { Kafka, logLevel, PartitionAssigners } = require('kafkajs');
    const assigner = ${JSON.stringify(options.assigner ?? null)};
    const consumer = new Kafka({ clientId: 'ghost', brokers: ${JSON.stringify(brokers)}, logLevel: logLevel.NOTHING }).consumer({
      groupId: ${JSON.stringify(group)}, sessionTimeout: ${options.sessionTimeoutMs}, heartbeatInterval: 3000,
      ...(assigner === null ? {} : { partitionAssigners: [(config) => ({ ...PartitionAssigners.roundRobin(config), name: assigner })] }),
    });
    consumer.on(consumer.events.GROUP_JOIN, (e) => console.log(e.payload.memberId));
    consumer.connect().then(() => consumer.subscribe({ topic: ${JSON.stringify(topic)} })).then(() => consumer.run({ eachMessage: async () => {} }));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout as NonNullable<ChildProcess['stdout']> });
  const exited = once(child, 'exit').then(() => Promise.reject(new Error(`the ghost member of ${group} exited before it joined`)));
  const [memberId] = (await Promise.race([once(lines, 'line'), exited])) as [string];
  return { child, memberId };
};
