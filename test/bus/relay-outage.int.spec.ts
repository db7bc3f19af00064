// The bus through Kafka outages, on a broker of its own (scripts/kafka.sh on a private port, so the
// shared test broker stays up). Slow by nature (broker starts); pending without KAFKA_BROKERS (no
// engines on this run).
// - The relay: the broker is stopped and started again on fresh storage. It stays down until kafkajs
//   has given up on a send twice, so the relay's own retry with a new producer runs and fails too,
//   and at least BUS_OUTAGE_SECONDS (default 0; longer to soak). The client here gives up after one
//   retry, where the service's retries five times (about 12 s): what is tested is the relay's own
//   retry after a give-up, not how long kafkajs takes to reach it. The relay keeps its checkpoint
//   where Kafka last acknowledged and catches up afterwards.
// - A dispatcher's consumer: the broker is killed and stays down past the point where kafkajs gives up
//   by default (about 6 s), or is stopped cleanly, and is restarted on its storage. Either way the
//   consumer consumes again soon after, not after the session a group waits for a silent member: it
//   rides a reset connection out as the same member, and when kafkajs restarts it as a new member
//   (its only broker closed the connections), or it starts again after kafkajs stopped it, the member
//   it was leaves the group.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { createLogCheckpoint } from '../../src/bus/checkpoint.js';
import { createBusConsumer } from '../../src/bus/consumer.js';
import { CONSUMER_RIDE_OUT_MS, createKafka, ensureTopic } from '../../src/bus/kafka.js';
import { HEADERS, toMessage } from '../../src/bus/message.js';
import { createRelay, type Relay } from '../../src/bus/relay.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { brokersFromEnv, headerOf, openTempLog, readTopic, uniqueName, type TempLog } from '../support/bus-kafka.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

const run = promisify(execFile);
const outageSeconds = Number(process.env['BUS_OUTAGE_SECONDS'] ?? 0);
const port = Number(process.env['KAFKA_PORT'] ?? 19092) + 100;
/** The service's default is 30 s; longer here, so a group that waits for a member cannot pass for one that does not. */
const SESSION_MS = 45_000;
/** From the restarted broker answering to the events handled: time for it to load the group, well inside SESSION_MS. */
const RESUME_MS = 20_000;
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};
const kafkaScript = (command: 'start' | 'stop' | 'restart') => run('bash', ['scripts/kafka.sh', command], { env: { ...process.env, KAFKA_PORT: String(port), KAFKA_CONTROLLER_PORT: String(port + 1) } });

describe('bus through a Kafka outage (real Kafka, slow)', function () {
  this.timeout(outageSeconds * 1000 + 240_000);
  let temp: TempLog;
  let relay: Relay | null = null;
  const errors: unknown[] = [];

  const append = async (count: number): Promise<RecordedEvent[]> => appendEvents(temp.log, 'ws-outage', Array.from({ length: count }, () => ticketUpdated(randomId())));

  before(async function () {
    if (brokersFromEnv() === null) this.skip();
    await kafkaScript('start');
    temp = openTempLog();
  });

  after(async () => {
    await relay?.stop();
    await temp?.close();
    await kafkaScript('stop');
  });

  it('holds the checkpoint while Kafka is down and relays everything once it is back', async () => {
    const kafka = new Kafka({ clientId: 'outage-test', brokers: [`127.0.0.1:${port}`], logLevel: logLevel.NOTHING, retry: { initialRetryTime: 200, retries: 1 } });
    const topic = uniqueName('outage');
    relay = createRelay({ log: temp.log, kafka, topic, checkpoint: createLogCheckpoint(temp.log, randomId), retryDelayMs: 200, checkpointEveryMs: 0, onError: (e) => errors.push(e) });
    await relay.start();
    const before = await append(10);
    const acked = (before.at(-1) as RecordedEvent).position;
    await relay.waitFor(acked);

    await kafkaScript('stop');
    const outageEnds = Date.now() + outageSeconds * 1000;
    const failedBefore = errors.length;
    const during = await append(10);
    await eventually('two sends that kafkajs gave up on', () => errors.length >= failedBefore + 2, 120_000);
    await settle(outageEnds - Date.now());
    expect(relay.acknowledgedThrough()).to.equal(acked);
    expect(await createLogCheckpoint(temp.log, randomId).read()).to.equal(acked);

    await kafkaScript('start');
    const last = (during.at(-1) as RecordedEvent).position;
    await relay.waitFor(last);
    // The restarted broker starts empty (kafka.sh formats fresh storage): it holds what came after.
    const ids = (await readTopic(kafka, topic, during.length)).map((m) => headerOf(m, HEADERS.eventId));
    for (const record of during) expect(ids, record.id).to.include(record.id);
    await relay.stop();
    relay = null;
    expect(await createLogCheckpoint(temp.log, randomId).read()).to.equal(last);
  });

  /**
   * A dispatcher's consumer with a `session` of 45 s unless given, its broker stopped with `signal`
   * and restarted on its storage: the events sent after it are handled within RESUME_MS of the broker
   * answering, well inside the session a group would wait for a member that left without a word.
   */
  const consumesAgainAfter = async (signal: 'SIGKILL' | 'SIGTERM', downMs: number, session = SESSION_MS) => {
    const kafka = createKafka([`127.0.0.1:${port}`], 'ride-out-test', CONSUMER_RIDE_OUT_MS);
    const [topic, group] = [uniqueName('ride-out'), uniqueName('dispatchers')];
    await ensureTopic(kafka, topic);
    const handled = new Set<string>();
    const reported: unknown[] = [];
    const consumer = createBusConsumer({ kafka, brokers: [`127.0.0.1:${port}`], topic, group, sessionTimeoutMs: session, handle: async (record) => void handled.add(record.id), onError: (e) => reported.push(e) });
    const producer = kafka.producer();
    const admin = kafka.admin();
    const members = async () => (await admin.describeGroups([group])).groups[0]?.members.map((m) => m.memberId) ?? [];
    const sendAndHandle = async (what: string, withinMs: number) => {
      const records = await append(5);
      await producer.send({ topic, messages: records.map(toMessage).map((m) => ({ key: m.key, value: m.value, headers: { ...m.headers } })) });
      await eventually(what, () => records.every((r) => handled.has(r.id)), withinMs);
    };
    try {
      await Promise.all([consumer.start(), producer.connect(), admin.connect()]);
      await sendAndHandle('the events before the restart', 60_000);
      const before = await members();
      expect(before).to.have.length(1);

      const pid = Number(readFileSync(`.cache/run/kafka-${port}/kafka.pid`, 'utf8'));
      process.kill(pid, signal);
      await eventually('the broker gone', () => !alive(pid), 60_000);
      await settle(downMs);
      await kafkaScript('restart');
      await sendAndHandle('the events after the restart', RESUME_MS).catch((error: unknown) => {
        // What the consumer went through is the only account of why it did not come back.
        throw new Error(`${String(error)}; the consumer reported:\n${reported.map(String).join('\n') || '(nothing)'}`, { cause: error });
      });
      const after = await members();
      expect(after).to.have.length(1);
      return { before, after, reported };
    } finally {
      await Promise.all([consumer.stop(), producer.disconnect(), admin.disconnect()]);
    }
  };

  it("rides out a broker killed for longer than kafkajs's own retries, and consumes again at once", async () => {
    // Down past kafkajs's default retries (about 6 s): the consumer keeps retrying as the same member
    // (or, if its connection was closed rather than reset, kafkajs restarts it as in the next case).
    await consumesAgainAfter('SIGKILL', 6_500);
  });

  it('consumes again at once after a clean restart of its broker', async () => {
    // The broker's clean stop closes the connections: under a request (often with heartbeats as
    // frequent as a short session asks), kafkajs restarts the consumer as a new member, and the member
    // it was leaves the group (leave-group.int.spec.ts has the deterministic case). When kafkajs stops
    // it for good instead (no broker answered its FindCoordinator), it starts a new one itself, and
    // the member it was leaves the same way (consumer.int.spec.ts cuts that request deterministically).
    const { before, after, reported } = await consumesAgainAfter('SIGTERM', 0, 6_000);
    if (after[0] === before[0]) return;
    expect(reported.map(String).join('\n')).to.include(`the member it was (${before[0] ?? ''}) leaves the group`);
    // Removed by a request, not by its session running out (the broker's account). The broker logs
    // "has left group ... through explicit `LeaveGroup`" for every member it removes so; "Removing
    // member ... on LeaveGroup" only when that starts a rebalance, not when the new member's join
    // had started one already.
    const left = readFileSync(`.cache/run/kafka-${port}/server.log`, 'utf8')
      .split('\n')
      .filter((line) => line.includes(before[0] ?? '') && line.includes('through explicit `LeaveGroup`'));
    expect(left, `the broker's log of ${before[0] ?? ''} leaving`).to.have.length.greaterThan(0);
  });
});
