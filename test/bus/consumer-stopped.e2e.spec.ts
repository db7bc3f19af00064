// A dispatcher whose Kafka consumer kafkajs stopped for good (an error it does not retry) delivers
// nothing until it is restarted: the consumer says so (onStopped) and the dispatcher's /readyz answers
// 503 naming it; its /admin/v1/metrics count the crash, by what followed. The error here is a real
// one: the group has a live member whose partition assigner no other member shares, so the broker
// refuses the consumer's join (INCONSISTENT_GROUP_PROTOCOL).
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Kafka } from 'kafkajs';
import { createBusConsumer, type CrashOutcome } from '../../src/bus/consumer.js';
import { ensureTopic } from '../../src/bus/kafka.js';
import { brokersFromEnv, ghost, requireKafka, uniqueName } from '../support/bus-kafka.js';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { eventually } from '../support/webhooks-dispatch.js';

const ADMIN = 'stopped-admin-token';

describe('a Kafka consumer that kafkajs stops for good (real Kafka)', function () {
  this.timeout(90_000);
  let kafka: Kafka;
  let brokers: string[];
  const children: ChildProcess[] = [];

  before(function () {
    kafka = requireKafka(this);
    brokers = brokersFromEnv() ?? [];
  });

  afterEach(() => children.splice(0).forEach((child) => child.kill('SIGKILL')));

  /** A topic and a group whose only member uses an assigner of its own. */
  const refusingGroup = async () => {
    const [topic, group] = [uniqueName('stopped'), uniqueName('group')];
    await ensureTopic(kafka, topic, 2);
    const other = await ghost(brokers, topic, group, { sessionTimeoutMs: 30_000, assigner: 'AnotherAssigner' });
    children.push(other.child);
    return { topic, group };
  };

  it('says so through onStopped and onError', async () => {
    const { topic, group } = await refusingGroup();
    const stopped: Error[] = [];
    const reported: unknown[] = [];
    const crashes: CrashOutcome[] = [];
    const consumer = createBusConsumer({
      kafka,
      brokers,
      topic,
      group,
      handle: async () => undefined,
      onError: (e) => reported.push(e),
      onStopped: (e) => stopped.push(e),
      onCrash: (outcome) => crashes.push(outcome),
    });
    try {
      await consumer.start();
      await eventually('the consumer stopped for good', () => stopped.length > 0, 30_000);
      expect(stopped).to.have.length(1);
      expect(stopped[0]?.message).to.include(`consumer of ${topic} in group ${group} for good`).and.to.include('incompatible');
      expect(reported).to.include(stopped[0]);
      expect(crashes).to.deep.equal(['stopped']);
    } finally {
      await consumer.stop();
    }
  });

  it("makes its dispatcher's /readyz answer 503 naming the consumer, while /healthz stays 200, and its metrics count the crash", async () => {
    const { topic, group } = await refusingGroup();
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-stopped-'));
    const processes: ProcessGroup = createProcessGroup({
      KAFKA_BROKERS: brokers.join(','),
      KAFKA_TOPIC: topic,
      KAFKA_GROUP: group,
      DATA_DIR: dataDir,
      WEBHOOK_SECRET_KEY: 'ab'.repeat(32),
      ADMIN_TOKEN: ADMIN,
    });
    try {
      const dispatcher = await processes.start('dispatcher', { ROLE: 'dispatcher' }, { ready: false });
      let last: { status: number; body: unknown } = { status: 0, body: null };
      await eventually(
        '/readyz naming the consumer',
        async () => {
          const response = await fetch(`${dispatcher.url}/readyz`);
          last = { status: response.status, body: await response.json() };
          if (last.status === 503) return true;
          await new Promise((resolve) => setTimeout(resolve, 200));
          return false;
        },
        30_000,
      ).catch((error: unknown) => Promise.reject(new Error(`${String(error)}; last /readyz ${JSON.stringify(last)}\n${processes.outputs()}`)));
      expect(last.body).to.deep.equal({ detail: 'Not ready: kafka consumer not answering' });
      expect((await fetch(`${dispatcher.url}/healthz`)).status).to.equal(200);
      const metrics = await fetch(`${dispatcher.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } }).then((r) => r.text());
      const crashes = [...metrics.matchAll(/^kafka_consumer_crashes_total\{outcome="(\w+)"\} (\d+)$/gm)].map(([, outcome, n]) => `${outcome}=${n}`);
      expect(crashes.sort()).to.deep.equal(['restarted=0', 'started_again=0', 'stopped=1']);
    } finally {
      await processes.stopAll();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
