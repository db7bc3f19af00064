// The relay against the real Kafka of the test run (pending without KAFKA_BROKERS) and a real SQLite log.
import { expect } from 'chai';
import type { Kafka } from 'kafkajs';
import { createLogCheckpoint, RelayFenced } from '../../src/bus/checkpoint.js';
import { HEADERS } from '../../src/bus/message.js';
import { createRelay, type Relay } from '../../src/bus/relay.js';
import { toEnvelope } from '../../src/domain/envelope.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { headerOf, openTempLog, readTopic, requireKafka, uniqueName, type TempLog, type TopicMessage } from '../support/bus-kafka.js';
import { appendEvents, internalEvent, ticketUpdated } from '../support/updates-events.js';

const publicEvents = async (temp: TempLog, workspaces: readonly string[], perWorkspace: number): Promise<RecordedEvent[]> => {
  const records: RecordedEvent[] = [];
  for (let i = 0; i < perWorkspace; i++) {
    for (const ws of workspaces) {
      records.push(...(await appendEvents(temp.log, ws, [ticketUpdated(randomId()), internalEvent])).filter((r) => r.offset !== null));
    }
  }
  return records;
};

const byEventId = (messages: readonly TopicMessage[]): Map<string, TopicMessage[]> => {
  const seen = new Map<string, TopicMessage[]>();
  for (const m of messages) seen.set(headerOf(m, HEADERS.eventId), [...(seen.get(headerOf(m, HEADERS.eventId)) ?? []), m]);
  return seen;
};

/** Every record exactly once, with the relay's key, value and headers, and in log order per workspace. */
const expectExactlyOnceInOrder = (messages: readonly TopicMessage[], records: readonly RecordedEvent[]): void => {
  const seen = byEventId(messages);
  expect(messages).to.have.length(records.length);
  for (const record of records) {
    const copies = seen.get(record.id) ?? [];
    expect(copies, `copies of ${record.id}`).to.have.length(1);
    const [m] = copies as [TopicMessage];
    expect(m.key?.toString()).to.equal(record.workspaceId);
    expect(m.value?.toString()).to.equal(JSON.stringify(toEnvelope(record)));
    expect(headerOf(m, HEADERS.type)).to.equal(record.type);
    expect(headerOf(m, HEADERS.workspaceId)).to.equal(record.workspaceId);
    expect(headerOf(m, HEADERS.position)).to.equal(String(record.position));
    expect(headerOf(m, HEADERS.offset)).to.equal(String(record.offset));
  }
  const partitionsOf = new Map<string, Set<number>>();
  for (const m of messages) partitionsOf.set(m.key?.toString() ?? '', (partitionsOf.get(m.key?.toString() ?? '') ?? new Set()).add(m.partition));
  for (const [ws, partitions] of partitionsOf) expect([...partitions], `partitions of ${ws}`).to.have.length(1);
  for (const ws of partitionsOf.keys()) {
    const positions = messages.filter((m) => m.key?.toString() === ws).map((m) => Number(headerOf(m, HEADERS.position)));
    expect(positions).to.deep.equal([...positions].sort((a, b) => a - b));
  }
};

describe('bus relay (real Kafka)', function () {
  this.timeout(60_000);
  let kafka: Kafka;
  let temp: TempLog;
  let topic: string;
  const running: Relay[] = [];

  const startRelay = async (): Promise<Relay> => {
    const relay = createRelay({ log: temp.log, kafka, topic, checkpoint: createLogCheckpoint(temp.log, randomId), retryDelayMs: 100 });
    await relay.start();
    running.push(relay);
    return relay;
  };

  beforeEach(function () {
    kafka = requireKafka(this);
    temp = openTempLog();
    topic = uniqueName('relay-test');
  });

  afterEach(async () => {
    for (const relay of running.splice(0)) await relay.stop();
    await temp?.close();
  });

  it('produces every public event exactly once, keyed and ordered per workspace, and no internal event', async () => {
    const workspaces = [randomId(), randomId(), randomId()];
    const records = await publicEvents(temp, workspaces, 40);
    const relay = await startRelay();
    await relay.waitFor((records.at(-1) as RecordedEvent).position);
    expectExactlyOnceInOrder(await readTopic(kafka, topic, records.length), records);
  });

  it('resumes from its checkpoint after a restart without loss or repeat', async () => {
    const workspaces = [randomId(), randomId()];
    const first = await publicEvents(temp, workspaces, 20);
    const relay = await startRelay();
    await relay.waitFor((first.at(-1) as RecordedEvent).position);
    await relay.stop();
    running.splice(running.indexOf(relay), 1);

    const second = await publicEvents(temp, workspaces, 20);
    const again = await startRelay();
    await again.waitFor((second.at(-1) as RecordedEvent).position);
    expectExactlyOnceInOrder(await readTopic(kafka, topic, first.length + second.length), [...first, ...second]);
  });

  it('keeps the checkpoint in the log: a second relay advancing it fences the first', async () => {
    const one = createLogCheckpoint(temp.log, randomId);
    const two = createLogCheckpoint(temp.log, randomId);
    expect(await one.read()).to.equal(0);
    await one.write(5);
    expect(await two.read()).to.equal(5);
    await two.write(9);
    let error: unknown = null;
    await one.write(12).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(RelayFenced);
    expect(await createLogCheckpoint(temp.log, randomId).read()).to.equal(9);
  });
});
