// A dispatcher fed by Kafka with the delivery-history index takes its backlog over while it consumes:
// a take-over of hundreds of thousands of waiting deliveries takes seconds, and the events committed
// meanwhile must not wait for it; but after each join of the group they wait for the index to have
// applied what the log held then (an event handed over again must find its deliveries). Real Kafka
// (pending without KAFKA_BROKERS), a real SQLite log and subscription directory; the dispatcher is
// one that records what it is handed, the take-over a source the test lets go a delivery at a time.
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import { ensureTopic } from '../../src/bus/kafka.js';
import { toMessage } from '../../src/bus/message.js';
import { createKafkaSource } from '../../src/bus/webhook-source.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DeliveryHistory } from '../../src/webhooks/dispatch/restore.js';
import type { LogTail } from '../../src/webhooks/dispatch/log-tail.js';
import { TAKE_OVER_RETRY_MS } from '../../src/webhooks/dispatch/take-over.js';
import { brokersFromEnv, openTempLog, requireKafka, uniqueName, type TempLog } from '../support/bus-kafka.js';
import { oneSubscription } from '../support/dispatcher-fixture.js';
import { gatedTakeOver, recordingDispatcher } from '../support/take-over.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'q'.repeat(32);

describe('a dispatcher fed by Kafka takes its backlog over while it consumes (int)', function () {
  this.timeout(60_000);
  let kafka: Kafka;
  let temp: TempLog;
  let topic: string;
  let producer: Producer;
  let tail: LogTail | null;
  /** What the dispatcher was handed: the events fanned out, and each delivery taken over. */
  let fannedOut: string[];
  let resumed: string[];
  let dispatcher: Dispatcher;

  /** A dispatcher's source started with `read` as its take-over; its index is caught up when `caughtUp` says so (at once by default). */
  const started = async (read: () => Promise<DeliveryHistory>, caughtUp = async (): Promise<void> => undefined): Promise<LogTail> => {
    const subscriptions = await oneSubscription(temp.log, WORKSPACE, SUBSCRIPTION);
    const source = createKafkaSource({ kafka, brokers: brokersFromEnv() ?? [], topic, group: uniqueName('dispatchers'), retryDelayMs: 100 }, { restore: read, caughtUp });
    tail = source({ log: temp.log, subscriptions, dispatcher });
    await tail.start();
    return tail;
  };

  const produced = async (): Promise<RecordedEvent> => {
    const [event] = await appendEvents(temp.log, WORKSPACE, [ticketUpdated('t1')]);
    const message = toMessage(event as RecordedEvent);
    await producer.send({ topic, acks: -1, messages: [{ key: message.key, value: message.value, headers: { ...message.headers } }] });
    return event as RecordedEvent;
  };

  beforeEach(async function () {
    kafka = requireKafka(this);
    temp = openTempLog();
    topic = uniqueName('source-test');
    ({ dispatcher, fannedOut, resumed } = recordingDispatcher());
    tail = null;
    await ensureTopic(kafka, topic, 1);
    producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner });
    await producer.connect();
  });

  afterEach(async () => {
    await tail?.stop();
    await producer?.disconnect();
    await temp?.close();
  });

  it('consumes before the take-over is done, and the take-over goes on to its end', async () => {
    const takeOver = gatedTakeOver(WORKSPACE, SUBSCRIPTION, 3);
    takeOver.release();
    await started(takeOver.read);
    const event = await produced();
    await eventually('the event fanned out', () => fannedOut.includes(event.id), 30_000);
    expect(resumed, 'taken over so far').to.deep.equal(['d0']);
    takeOver.release(2);
    await eventually('all taken over', () => resumed.length === 3);
    expect(resumed).to.deep.equal(['d0', 'd1', 'd2']);
  });

  it('fans out nothing after a join of the group until the index has applied what the log held at the join', async () => {
    const takeOver = gatedTakeOver(WORKSPACE, SUBSCRIPTION, 1);
    takeOver.release();
    let asked = 0;
    let applied: () => void = () => undefined;
    await started(takeOver.read, () => {
      asked += 1;
      return new Promise<void>((resolve) => (applied = resolve));
    });
    await eventually('the index asked at the join', () => asked === 1, 30_000);
    const event = await produced();
    // Kafka hands the event over within this (the first test's own wait, unhindered, is far shorter).
    await sleep(2_000);
    expect(fannedOut, 'fanned out while the index lags').to.deep.equal([]);
    applied();
    await eventually('the event fanned out once the index caught up', () => fannedOut.includes(event.id), 30_000);
    expect(asked, 'asked once a join').to.equal(1);
  });

  it('reads the take-over again when it fails part way, and a stop ends it at the next delivery', async () => {
    const takeOver = gatedTakeOver(WORKSPACE, SUBSCRIPTION, 4, 2);
    takeOver.release(2);
    await started(takeOver.read);
    takeOver.release();
    // Failed at d2: read again after a pause, from the first.
    await eventually('read again', () => takeOver.reads() === 2, TAKE_OVER_RETRY_MS * 5);
    await eventually('taken over again up to where it is let go', () => resumed.length === 5);
    expect(resumed).to.deep.equal(['d0', 'd1', 'd0', 'd1', 'd2']);
    const stopped = tail?.stop();
    tail = null;
    takeOver.release();
    await stopped;
    expect(resumed, 'nothing after the stop').to.deep.equal(['d0', 'd1', 'd0', 'd1', 'd2']);
  });
});
