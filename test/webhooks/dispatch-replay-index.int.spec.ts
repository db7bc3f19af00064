// A dispatcher fed by Kafka that restarts from the delivery history index in Redis remembers no
// delivery of its own: an event Kafka hands over again (its offset was not committed before a crash,
// or a rebalance moved its partition) must find its deliveries in the index, and neither schedule
// nor send them a second time; with a shared schedule, one whose dispatcher died between recording
// it and putting its attempt in the schedule is sent by the dispatcher the event is handed to. Real
// SQLite log, real Redis (a private server, paused for the rough path); the directory is a fixed
// one-subscription view.
import { expect } from 'chai';
import { unpackSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryIdOf, deliveryStream, legacyDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { HistoryIndexer } from '../../src/webhooks/dispatch/history-index.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import type { DeliveryIndex, DeliveryKey } from '../../projections/deliveries-index.js';
import { recordDelivery, recordingDeps, subscriptionsOf } from '../support/dispatcher-fixture.js';
import { indexedDispatch } from '../support/indexed-dispatch.js';
import type { PrivateRedis } from '../support/redis-server.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'r'.repeat(32);

describe('dispatcher restarted from the Redis history index: an event handed over again (int)', function () {
  this.timeout(30_000);
  const world = indexedDispatch(WORKSPACE, SUBSCRIPTION);
  let redis: PrivateRedis;
  let log: SqliteEventLog;
  let index: DeliveryIndex;
  let indexer: HistoryIndexer;
  let directory: SubscriptionDirectory;
  const { dispatchers, sharedSchedule } = world;
  const sent: DeliveryRequest[] = [];

  beforeEach(() => {
    ({ redis, log, index, indexer, directory } = world);
    sent.length = 0;
  });

  /** A dispatcher as the Kafka source starts one: from what the index says is waiting. */
  const startDispatcher = async (schedule?: SharedRetrySchedule, subscriptions = directory, records = recordsForKafka(log, index, () => indexer.pending())): Promise<Dispatcher> => {
    const deps = { ...recordingDeps(log, subscriptions, sent), records };
    const dispatcher = createDispatcher(schedule === undefined ? deps : { ...deps, schedule: { shared: schedule } });
    dispatchers.push(dispatcher);
    const pending = await indexer.pending();
    await dispatcher.resume(pending.deliveries, pending.fannedOutThrough);
    dispatcher.start();
    return dispatcher;
  };

  const publicEvent = async (): Promise<RecordedEvent> => {
    const { records } = await log.append('ticket-1', [{ id: 'e'.repeat(32), type: 'ticket.created', workspaceId: WORKSPACE, data: { ticket_id: 't1' } }], 'no_stream');
    return records[0] as RecordedEvent;
  };

  const scheduledSteps = async (): Promise<number> => (await log.readStream(deliveryStream(SUBSCRIPTION))).flatMap(unpackSteps).filter((step) => step.type === 'delivery.scheduled').length;

  /** The event fanned out and delivered by a first dispatcher, which then stops (a crash before its offset was committed). */
  const deliveredOnceThenRestarted = async (): Promise<{ event: RecordedEvent; restarted: Dispatcher }> => {
    const event = await publicEvent();
    const first = await startDispatcher();
    await first.fanOut(event, event.position);
    await eventually('the delivery sent', () => sent.length === 1);
    await eventually('the delivery recorded as delivered in the index', async () => (await index.page({ subscriptionId: SUBSCRIPTION, status: 'delivered', limit: 1 })).items.length === 1);
    await first.stop();
    return { event, restarted: await startDispatcher() };
  };

  it('neither schedules nor sends the delivery again', async () => {
    const { event, restarted } = await deliveredOnceThenRestarted();
    await restarted.fanOut(event, event.position);
    await settle(300);
    expect(sent).to.have.length(1);
    expect(await scheduledSteps()).to.equal(1);
  });

  it("asks the index once for all of an event's deliveries, and schedules only those it does not have", async () => {
    const ids = ['a', 'b', 'c'].map((c) => c.repeat(32));
    const three = await subscriptionsOf(log, WORKSPACE, ids);
    const event = await publicEvent();
    const records = recordsForKafka(log, index, () => indexer.pending());
    const asked: number[] = [];
    const counted = { ...records, recorded: (keys: readonly DeliveryKey[]) => (asked.push(keys.length), index.has(keys)) };
    // The first dispatcher's directory had not applied the third subscription yet.
    const first = await startDispatcher(undefined, { ...three, matching: (ws, type) => three.matching(ws, type).filter((row) => row.id !== ids[2]) }, counted);
    await first.fanOut(event, event.position);
    await eventually('two deliveries sent', () => sent.length === 2);
    const keys = ids.map((subscriptionId) => ({ subscriptionId, deliveryId: deliveryIdOf(event.id, subscriptionId) }));
    await eventually('both in the index', async () => (await index.has(keys.slice(0, 2))).every(Boolean));
    await first.stop();
    const restarted = await startDispatcher(undefined, three, counted);
    await restarted.fanOut(event, event.position);
    await eventually('the third delivery sent', () => sent.length === 3);
    await settle(300);
    expect(asked, 'one read per fan-out, of every delivery it would schedule, each under its id and its older one').to.deep.equal([4, 6]);
    // The first two go out in either order; the third only after the restart.
    expect(sent.slice(0, 2).map((request) => request.deliveryId).sort()).to.deep.equal(keys.slice(0, 2).map((key) => key.deliveryId).sort());
    expect(sent[2]?.deliveryId).to.equal(keys[2]?.deliveryId);
  });

  it('finds a delivery an older release recorded under its hashed id, and neither schedules nor sends it again', async () => {
    const event = await publicEvent();
    const legacy = { subscriptionId: SUBSCRIPTION, deliveryId: legacyDeliveryIdOf(event.id, SUBSCRIPTION) };
    await recordDelivery(log, event, { ...legacy, fannedOutThrough: event.position, delivered: true });
    await eventually('the delivery in the index', async () => (await index.has([legacy]))[0] === true);
    const restarted = await startDispatcher();
    await restarted.fanOut(event, event.position);
    await settle(300);
    expect(sent).to.have.length(0);
    expect(await scheduledSteps()).to.equal(1);
  });

  it('refuses the event while the index does not answer (Kafka hands it over again), and skips it once it does', async () => {
    const { event, restarted } = await deliveredOnceThenRestarted();
    redis.pause();
    let failure: unknown = null;
    await restarted.fanOut(event, event.position).catch((error: unknown) => (failure = error));
    expect(failure, 'the fan-out fails rather than schedule blind').to.be.instanceOf(Error);
    redis.resume();
    await restarted.fanOut(event, event.position);
    await settle(300);
    expect(sent).to.have.length(1);
    expect(await scheduledSteps()).to.equal(1);
  });

  it('with a shared schedule, sends a delivery whose dispatcher died between recording it and putting its attempt in the schedule', async () => {
    const event = await publicEvent();
    const shared = await sharedSchedule();
    // Running before the record: its start had nothing to take over.
    const survivor = await startDispatcher(shared);
    const killed = createDispatcher({
      ...recordingDeps(log, directory, sent),
      records: recordsForKafka(log, index, () => indexer.pending()),
      schedule: { shared: { ...shared, put: () => Promise.reject(new Error('killed before its put')), putAndTake: () => Promise.reject(new Error('killed before its put')) } },
    });
    dispatchers.push(killed);
    const fanOut = await killed.fanOut(event, event.position).then(() => 'fanned out', (error: unknown) => String(error));
    expect(fanOut).to.contain('killed before its put');
    expect(await shared.size(), 'nothing in the schedule').to.equal(0);
    await eventually('the record in the index', async () => (await index.page({ subscriptionId: SUBSCRIPTION, status: 'waiting', limit: 1 })).items.length === 1);
    // Its offset was not committed: Kafka hands the event to the survivor.
    await survivor.fanOut(event, event.position);
    await eventually('the delivery sent by the survivor', () => sent.length === 1);
    await eventually('the delivery recorded as delivered in the index', async () => (await index.page({ subscriptionId: SUBSCRIPTION, status: 'delivered', limit: 1 })).items.length === 1);
    // Handed over once more: the delivered delivery is neither offered nor sent again.
    await survivor.fanOut(event, event.position);
    await settle(300);
    expect(sent).to.have.length(1);
    expect(await scheduledSteps()).to.equal(1);
    expect(await shared.size()).to.equal(0);
  });

  it('with a shared schedule, sends once a waiting delivery that an older release recorded under its hashed id and died before putting', async () => {
    const event = await publicEvent();
    const shared = await sharedSchedule();
    const survivor = await startDispatcher(shared);
    const legacy = { subscriptionId: SUBSCRIPTION, deliveryId: legacyDeliveryIdOf(event.id, SUBSCRIPTION) };
    await recordDelivery(log, event, { ...legacy, fannedOutThrough: event.position, delivered: false });
    await eventually('the record in the index', async () => (await index.has([legacy]))[0] === true);
    await survivor.fanOut(event, event.position);
    await eventually('the delivery sent by the survivor', () => sent.length === 1);
    await settle(300);
    expect(sent.map((request) => request.deliveryId)).to.deep.equal([legacy.deliveryId]);
    expect(await scheduledSteps()).to.equal(1);
  });
});
