// The dispatcher's consumer against the real Kafka of the test run (pending without KAFKA_BROKERS).
// The handler here stands for the dispatcher's fan-out: the test controls when it finishes or fails.
import { expect } from 'chai';
import { connect } from 'node:net';
import { Kafka as KafkaClient, logLevel, Partitioners, type Admin, type ISocketFactory, type Kafka, type Producer } from 'kafkajs';
import { createBusConsumer, type BusConsumer, type CrashOutcome } from '../../src/bus/consumer.js';
import { ensureTopic } from '../../src/bus/kafka.js';
import { toMessage } from '../../src/bus/message.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { brokersFromEnv, openTempLog, requireKafka, uniqueName, type TempLog } from '../support/bus-kafka.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';

describe('bus consumer (real Kafka)', function () {
  this.timeout(60_000);
  let kafka: Kafka;
  let temp: TempLog;
  let topic: string;
  let group: string;
  let producer: Producer;
  const consumers: BusConsumer[] = [];
  const errors: unknown[] = [];

  const events = async (count: number): Promise<RecordedEvent[]> => appendEvents(temp.log, 'ws-1', Array.from({ length: count }, () => ticketUpdated(randomId())));

  const produce = async (messages: readonly { key: string; value: Buffer | string; headers?: Record<string, string> }[]) => {
    await producer.send({ topic, acks: -1, messages: messages.map((m) => ({ ...m })) });
  };

  const produceEvents = (records: readonly RecordedEvent[]) => produce(records.map((r) => { const m = toMessage(r); return { key: m.key, value: m.value, headers: { ...m.headers } }; }));

  const start = async (handle: (record: RecordedEvent) => Promise<void>): Promise<BusConsumer> => {
    const consumer = createBusConsumer({ kafka, brokers: brokersFromEnv() ?? [], topic, group, handle, retryDelayMs: 100, onError: (e) => errors.push(e) });
    await consumer.start();
    consumers.push(consumer);
    return consumer;
  };

  /** The group's committed offset on partition 0 (-1 when none), through `admin` or a client of its own. */
  const committed = async (admin?: Admin): Promise<number> => {
    const client = admin ?? kafka.admin();
    if (admin === undefined) await client.connect();
    try {
      const [entry] = await client.fetchOffsets({ groupId: group, topics: [topic] });
      return Number(entry?.partitions.find((p) => p.partition === 0)?.offset ?? -1);
    } finally {
      if (admin === undefined) await client.disconnect();
    }
  };

  beforeEach(async function () {
    kafka = requireKafka(this);
    temp = openTempLog();
    topic = uniqueName('consumer-test');
    group = uniqueName('dispatchers');
    errors.length = 0;
    await ensureTopic(kafka, topic, 1);
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
  });

  afterEach(async () => {
    for (const consumer of consumers.splice(0)) await consumer.stop();
    await producer?.disconnect();
    await temp?.close();
  });

  it('rebuilds each relayed event exactly as recorded', async () => {
    const records = await events(3);
    await produceEvents(records);
    const handled: RecordedEvent[] = [];
    await start(async (record) => void handled.push(record));
    await eventually('3 events handled', () => handled.length === 3);
    expect(handled).to.deep.equal(records.map((r) => ({ ...r, metadata: {} })));
  });

  it('logs and skips a poison message and goes on with the partition', async () => {
    const [before, after] = await events(2);
    const envelope = toMessage(before as RecordedEvent);
    await produceEvents([before as RecordedEvent]);
    await produce([
      { key: 'ws-1', value: 'not json at all' },
      { key: 'ws-1', value: envelope.value, headers: { ...envelope.headers, position: 'x' } },
      { key: 'ws-1', value: Buffer.from('{"id":"1"}'), headers: { ...envelope.headers } },
    ]);
    await produceEvents([after as RecordedEvent]);
    const handled: string[] = [];
    await start(async (record) => void handled.push(record.id));
    await eventually('both valid events handled', () => handled.length === 2);
    expect(handled).to.deep.equal([before?.id, after?.id]);
    await eventually('offsets committed past the poison', async () => (await committed()) === 5);
    expect(errors.filter((e) => String(e).includes('skipped'))).to.have.length(3);
  });

  it('commits an event only after its fan-out is done, and hands a failed one over again', async () => {
    const records = await events(3);
    const [first, second, third] = records as [RecordedEvent, RecordedEvent, RecordedEvent];
    let release: () => void = () => undefined;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    let failOnce = true;
    const handled: string[] = [];
    await start(async (record) => {
      if (record.id === second.id) await blocked;
      if (record.id === third.id && failOnce) {
        failOnce = false;
        throw new Error('log unreachable');
      }
      handled.push(record.id);
    });
    await produceEvents(records);
    await eventually('the first event handled', () => handled.includes(first.id));
    // Hold the second: nothing may be committed past the first while it runs.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await committed()).to.be.at.most(1);
    release();
    await eventually('all handled, the third after a retry', () => handled.length === 3);
    expect(handled).to.deep.equal([first.id, second.id, third.id]);
    await eventually('all committed', async () => (await committed()) === 3);
    expect(errors.map(String)).to.include('Error: log unreachable');
  });

  it('commits what its batches handled about once a second, not after each batch, and a quiet partition too', async () => {
    const records = await events(12);
    const handled: string[] = [];
    await start(async (record) => void handled.push(record.id));
    // One send every 100 ms: each its own batch, which kafkajs's autoCommit would commit one by one.
    const sending = (async () => {
      for (const record of records) {
        await produceEvents([record]);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const seen = new Set<number>();
    let sent = false;
    void sending.then(() => (sent = true));
    const admin = kafka.admin();
    await admin.connect();
    const deadline = Date.now() + 20_000;
    let offset = -1;
    try {
      while (!(sent && offset === records.length) && Date.now() < deadline) {
        offset = await committed(admin);
        if (offset >= 0) seen.add(offset);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    } finally {
      await admin.disconnect();
    }
    expect(offset, 'all committed').to.equal(records.length);
    expect(handled).to.have.length(records.length);
    // Sends over about 1.2 s (longer on a loaded machine): a commit at each second's tick, the last
    // one's with no batch after it. A commit per batch showed 11 offsets here.
    expect(seen.size, `committed offsets seen: ${[...seen].join(', ')}`).to.be.at.most(6);
  });

  it('commits what it handled when it stops, without waiting for the next second', async () => {
    const records = await events(5);
    await produceEvents(records);
    const handled: string[] = [];
    const consumer = await start(async (record) => void handled.push(record.id));
    await eventually('5 events handled', () => handled.length === 5);
    await consumer.stop();
    expect(await committed()).to.equal(5);
  });

  /**
   * A client whose connections break instead of sending the consumer's first `cuts` FindCoordinator
   * requests: no broker tells it where its group is, and kafkajs stops the consumer for good
   * (kafkajs#1630). A lone broker shutting down while it asks is enough, which is how a clean restart
   * of the broker (relay-outage.int.spec.ts) sometimes left a dispatcher consuming nothing.
   */
  const cuttingFindCoordinator = (cuts: number) => {
    const cut = { left: cuts, done: 0 };
    const socketFactory: ISocketFactory = ({ host, port, onConnect }) => {
      const socket = connect({ host, port }, onConnect);
      const write = socket.write.bind(socket) as (chunk: unknown, ...rest: unknown[]) => boolean;
      socket.write = ((chunk: unknown, ...rest: unknown[]) => {
        // A request's frame: its size, then its api key (10: FindCoordinator).
        if (cut.left > 0 && Buffer.isBuffer(chunk) && chunk.length >= 6 && chunk.readInt16BE(4) === 10) {
          cut.left -= 1;
          cut.done += 1;
          socket.destroy(Object.assign(new Error('connect ECONNREFUSED (cut by the test)'), { code: 'ECONNREFUSED' }));
          return false;
        }
        return write(chunk, ...rest);
      }) as typeof socket.write;
      return socket;
    };
    return { cut, kafka: new KafkaClient({ clientId: 'cut-test', brokers: brokersFromEnv() ?? [], logLevel: logLevel.NOTHING, socketFactory }) };
  };

  const startCutting = async (cuts: number, handled: Set<string>, stopped: Error[]) => {
    const { cut, kafka: cutting } = cuttingFindCoordinator(cuts);
    const crashes: CrashOutcome[] = [];
    const consumer = createBusConsumer({
      kafka: cutting,
      brokers: brokersFromEnv() ?? [],
      topic,
      group,
      handle: async (record) => void handled.add(record.id),
      onError: (e) => errors.push(e),
      onStopped: (e) => stopped.push(e),
      onCrash: (outcome) => crashes.push(outcome),
    });
    consumers.push(consumer);
    await consumer.start();
    return { cut, consumer, crashes };
  };

  it('starts again, as a new consumer, when kafkajs stops it for good because no broker told it where its group is', async () => {
    const records = await events(3);
    await produceEvents(records);
    const [handled, stopped] = [new Set<string>(), [] as Error[]];
    const { cut, crashes } = await startCutting(1, handled, stopped);
    await eventually('the events handled by the consumer started again', () => records.every((r) => handled.has(r.id)), 30_000);
    expect(cut.done, 'FindCoordinator requests cut').to.equal(1);
    expect(stopped, 'stopped for good').to.deep.equal([]);
    expect(crashes, 'crashes counted, by what followed').to.deep.equal(['started_again']);
    expect(errors.map(String).join('\n')).to.include('kafkajs stopped the consumer after: Failed to find group coordinator; it starts again');
  });

  it('is started again until it stops, and not after', async () => {
    const [handled, stopped] = [new Set<string>(), [] as Error[]];
    const { cut, consumer, crashes } = await startCutting(Number.POSITIVE_INFINITY, handled, stopped);
    await eventually('three starts again', () => cut.done >= 4, 30_000);
    await consumer.stop();
    const atStop = cut.done;
    const crashesAtStop = crashes.length;
    // Longer than a start again waits, and than a start under way at the stop takes to reach its FindCoordinator.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(cut.done - atStop, 'FindCoordinator requests after the stop').to.be.at.most(1);
    expect(crashesAtStop, 'crashes counted before the stop').to.be.at.least(3);
    expect(new Set(crashes), 'what followed each').to.deep.equal(new Set(['started_again']));
    const admin = kafka.admin();
    await admin.connect();
    try {
      const [described] = (await admin.describeGroups([group])).groups;
      expect(described?.members ?? [], 'members after the stop').to.deep.equal([]);
    } finally {
      await admin.disconnect();
    }
    expect(stopped, 'stopped for good').to.deep.equal([]);
  });
});
