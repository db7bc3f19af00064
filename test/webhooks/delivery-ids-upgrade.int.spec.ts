// Delivery ids start with their event's time (src/domain/delivery/ids.ts); an older release gave the
// same delivery the hash alone. A dispatcher of this release that starts on a log an older one wrote
// must find what that one recorded, whatever shape its ids have, and neither schedule nor send it a
// second time: an event fanned out again after a restart (its deliveries recorded, the fan-out
// checkpoint not past it), and a replay continued after a restart. Real SQLite log, memory schedule.
// (The Kafka path, where an event handed over again is looked up in the Redis index, is in
// dispatch-replay-index.int.spec.ts.)
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { foldDeliveries, unpackSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryIdOf, deliveryStream, legacyDeliveryIdOf, legacyReplayDeliveryIdOf, replayDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { driveReplay } from '../../src/webhooks/dispatch/replay-driver.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { appendPublicEvent, oneSubscription, recordDelivery, recordingDeps, requestReplay } from '../support/dispatcher-fixture.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'u'.repeat(32);
const REPLAY = 'r'.repeat(32);

describe('delivery ids recorded by an older release, after a restart (int)', function () {
  this.timeout(20_000);
  let dir: string;
  let log: SqliteEventLog;
  let directory: SubscriptionDirectory;
  let dispatcher: Dispatcher | undefined;
  const sent: DeliveryRequest[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-ids-upgrade-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    sent.length = 0;
  });

  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const deliveries = async () => foldDeliveries((await log.readStream(deliveryStream(SUBSCRIPTION))).flatMap(unpackSteps));
  const scheduledSteps = async (): Promise<number> => (await log.readStream(deliveryStream(SUBSCRIPTION))).flatMap(unpackSteps).filter((step) => step.type === 'delivery.scheduled').length;

  /** A dispatcher of this release started as the embedded engine starts one: from the deliveries the history has. */
  const restart = async (fannedOutThrough: number): Promise<Dispatcher> => {
    dispatcher = createDispatcher(recordingDeps(log, directory, sent));
    await dispatcher.resume([...(await deliveries()).values()].map((delivery) => ({ delivery, workspaceId: WORKSPACE })), fannedOutThrough);
    dispatcher.start();
    return dispatcher;
  };

  const fannedOutByOlderRelease = async (delivered: boolean): Promise<{ event: RecordedEvent; restarted: Dispatcher }> => {
    const event = await appendPublicEvent(log, WORKSPACE, 1);
    // Recorded, and the process died before the fan-out checkpoint passed the event.
    await recordDelivery(log, event, { subscriptionId: SUBSCRIPTION, deliveryId: legacyDeliveryIdOf(event.id, SUBSCRIPTION), fannedOutThrough: 0, delivered });
    return { event, restarted: await restart(0) };
  };

  it('does not schedule or send again a delivered one whose event is fanned out again', async () => {
    const { event, restarted } = await fannedOutByOlderRelease(true);
    await restarted.fanOut(event, 0);
    await settle(300);
    expect(sent).to.have.length(0);
    expect(await scheduledSteps()).to.equal(1);
  });

  it('sends a waiting one once, under the id it was recorded with, and does not schedule it again', async () => {
    const { event, restarted } = await fannedOutByOlderRelease(false);
    await restarted.fanOut(event, 0);
    await eventually('the waiting delivery sent', () => sent.length === 1);
    await settle(300);
    expect(sent.map((request) => request.deliveryId)).to.deep.equal([legacyDeliveryIdOf(event.id, SUBSCRIPTION)]);
    expect(await scheduledSteps()).to.equal(1);
    expect((await deliveries()).get(legacyDeliveryIdOf(event.id, SUBSCRIPTION))?.status).to.equal('delivered');
  });

  it('schedules the event under the new id when the older release had not recorded it', async () => {
    const event = await appendPublicEvent(log, WORKSPACE, 1);
    await (await restart(0)).fanOut(event, 0);
    await eventually('the delivery sent', () => sent.length === 1);
    expect(sent[0]?.deliveryId).to.equal(deliveryIdOf(event.id, SUBSCRIPTION));
  });

  it('continues a replay without scheduling again an event it had scheduled under an old id', async () => {
    const replay = await requestReplay(log, WORKSPACE, SUBSCRIPTION, REPLAY, 3);
    const events = await log.readAll({ after: 0, types: ['ticket.created'] });
    const first = events[0] as RecordedEvent;
    await recordDelivery(log, first, { subscriptionId: SUBSCRIPTION, deliveryId: legacyReplayDeliveryIdOf(first.id, SUBSCRIPTION, REPLAY), fannedOutThrough: 0, delivered: true, replayId: REPLAY });
    const restarted = await restart(await log.headPosition());
    const outcome = await driveReplay({ log, subscriptions: directory, dispatcher: restarted, clock: () => Date.now() * 1000, keep: async () => true, stopped: () => false }, WORKSPACE, replay);
    expect(outcome).to.equal('finished');
    await eventually('the other two replayed deliveries sent', () => sent.length === 2);
    await settle(300);
    expect(sent.map((request) => request.deliveryId).sort()).to.deep.equal(events.slice(1).map((event) => replayDeliveryIdOf(event.id, SUBSCRIPTION, REPLAY)).sort());
    expect(await scheduledSteps()).to.equal(3);
  });
});
