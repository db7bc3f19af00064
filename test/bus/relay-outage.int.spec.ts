// The relay through a Kafka outage: a broker of its own (scripts/kafka.sh on a private port, so the
// shared test broker stays up) is stopped and started again. It stays down until kafkajs has given
// up on a send twice, so the relay's own retry with a new producer runs and fails too, and at least
// BUS_OUTAGE_SECONDS (default 0; longer to soak). The client here gives up after one retry, where the
// service's retries five times (about 12 s): what is tested is the relay's own retry after a give-up,
// not how long kafkajs takes to reach it. The relay keeps its checkpoint where Kafka last
// acknowledged and catches up afterwards. Slow by nature (two broker starts); pending without
// KAFKA_BROKERS (no engines on this run).
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { createLogCheckpoint } from '../../src/bus/checkpoint.js';
import { HEADERS } from '../../src/bus/message.js';
import { createRelay, type Relay } from '../../src/bus/relay.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { brokersFromEnv, headerOf, openTempLog, readTopic, uniqueName, type TempLog } from '../support/bus-kafka.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

const run = promisify(execFile);
const outageSeconds = Number(process.env['BUS_OUTAGE_SECONDS'] ?? 0);
const port = Number(process.env['KAFKA_PORT'] ?? 19092) + 100;
const kafkaScript = (command: 'start' | 'stop') => run('bash', ['scripts/kafka.sh', command], { env: { ...process.env, KAFKA_PORT: String(port), KAFKA_CONTROLLER_PORT: String(port + 1) } });

describe('bus relay through a Kafka outage (real Kafka, slow)', function () {
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
});
