// A relay or a dispatcher whose KAFKA_BROKERS point where no Kafka answers fails its start in one
// line naming what could not be reached, not with kafkajs's chain of errors. No Kafka needed: the
// brokers are loopback ports where nothing listens.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createLogCheckpoint } from '../../src/bus/checkpoint.js';
import { createBusConsumer } from '../../src/bus/consumer.js';
import { Kafka, logLevel } from 'kafkajs';
import { KafkaUnavailable, reaching } from '../../src/bus/kafka.js';
import { createRelay } from '../../src/bus/relay.js';
import { randomId } from '../../src/shared/ids.js';
import { openTempLog } from '../support/bus-kafka.js';

/** A loopback port with no listener (the discard port is never served here). */
const DEAD = '127.0.0.1:9';
/** Gives up after one retry, where the service's clients take about 6 s (the process case below). */
const quickToGiveUp = () => new Kafka({ clientId: 'unreachable-test', brokers: [DEAD], logLevel: logLevel.NOTHING, retry: { retries: 1, initialRetryTime: 100 } });
const UNREACHABLE = /^Kafka does not answer \(KAFKA_BROKERS\): Connection error: connect ECONNREFUSED 127\.0\.0\.1:9$/;

describe('a start whose Kafka does not answer', function () {
  // The process keeps the service's retries (about 6 s) before it gives up.
  this.timeout(30_000);

  it('fails a relay start with KafkaUnavailable naming the address', async () => {
    const temp = openTempLog();
    try {
      const relay = createRelay({ log: temp.log, kafka: quickToGiveUp(), topic: 't', checkpoint: createLogCheckpoint(temp.log, randomId) });
      const error = await relay.start().then(() => null, (e: unknown) => e);
      expect(error).to.be.instanceOf(KafkaUnavailable);
      expect((error as Error).message).to.match(UNREACHABLE);
    } finally {
      await temp.close();
    }
  });

  it("fails a dispatcher consumer's start the same way", async () => {
    const consumer = createBusConsumer({ kafka: quickToGiveUp(), brokers: [DEAD], topic: 't', group: 'g', handle: async () => undefined, onError: () => undefined });
    const error = await consumer.start().then(() => null, (e: unknown) => e);
    await consumer.stop();
    expect(error).to.be.instanceOf(KafkaUnavailable);
    expect((error as Error).message).to.match(UNREACHABLE);
  });

  it('leaves every other failure as it is', async () => {
    const other = new Error('topic authorization failed');
    expect(await reaching(() => Promise.reject(other)).then(() => null, (e: unknown) => e)).to.equal(other);
    expect(await reaching(async () => 42)).to.equal(42);
  });

  it('ends a ROLE=relay process with one line: "cannot start: Kafka does not answer ..."', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-unreachable-'));
    try {
      const { PATH, HOME } = process.env;
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
        env: { PATH: PATH ?? '', HOME: HOME ?? '', ROLE: 'relay', KAFKA_BROKERS: DEAD, DATA_DIR: dataDir, WEBHOOK_SECRET_KEY: 'ab'.repeat(32), PORT: '0', HOST: '127.0.0.1' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).to.equal(1);
      expect(stderr.trim().split('\n')).to.deep.equal(['cannot start: Kafka does not answer (KAFKA_BROKERS): Connection error: connect ECONNREFUSED 127.0.0.1:9']);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
