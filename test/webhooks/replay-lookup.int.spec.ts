// What a replay asks of a subscription's deliveries, page by page: whether it scheduled an event
// already (a driver that stopped after its last progress record), and whether the event's live
// delivery ended failed (only_failed). Looked up by id in the delivery-history index, with the
// stream's records the index had not applied yet (delivery-now.ts `deliveriesNow`), against each
// index adapter (Redis with REDIS_URL) on the real SQLite log: always what a reading of the whole
// stream gives, reading only the records after what the index applied. Then the replay driver over
// it and over the log alone (a dispatcher with no index reads the stream once, whole).
import { expect } from 'chai';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryIdOf, deliveryStream, legacyDeliveryIdOf, replayDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { Replay } from '../../src/domain/replay/replay.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { deliveriesNow } from '../../src/webhooks/dispatch/delivery-now.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { recordsFromIndex } from '../../src/webhooks/dispatch/history-index.js';
import { driveReplay } from '../../src/webhooks/dispatch/replay-driver.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { DELIVERY_INDEX_TYPES, type DeliveryIndex } from '../../projections/deliveries-index.js';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import { appendHistory, deliveryRecords, deliverySteps, historyRecords, INDEX_ADAPTERS, indexedLog, watched, wholeStream, type StreamRead } from '../support/delivery-steps.js';
import { currentReplay, oneSubscription, recordDelivery, recordingDeps, requestReplay } from '../support/dispatcher-fixture.js';
import { eventually, settle } from '../support/webhooks-dispatch.js';

for (const adapter of INDEX_ADAPTERS) {
  describe(`a subscription's deliveries looked up by id for a replay (${adapter} index, real SQLite log)`, () => {
    const world = indexedLog(adapter);

    it('reads only the records after what the index applied, and finds what only they hold', async () => {
      const records = deliveryRecords(world.log);
      for (let i = 0; i < 40; i++) await records.append([...records.schedule(`d${i}`), ...records.attempt(`d${i}`, i % 3 === 0 ? 'failed' : 'delivered')]);
      await world.feed.applyNext(30);
      const reads = watched(world.log);
      const found = await deliveriesNow(world.index, reads.log, 's', ['d3', 'd35', 'nowhere']);
      expect(reads.from).to.deep.equal([30]);
      const whole = await wholeStream(world.log);
      expect([...found.keys()].sort()).to.deep.equal(['d3', 'd35']);
      expect(found.get('d3')).to.deep.equal(whole.get('d3'));
      expect(found.get('d35')).to.deep.equal(whole.get('d35'));
    });

    it('answers each delivery asked as a reading of the whole stream does, whatever the index has applied (property)', async () => {
      const round = fc.record({ steps: historyRecords, indexed: fc.nat(8), asked: fc.array(fc.nat(), { maxLength: 6 }) });
      await fc.assert(
        fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 5 }), async (rounds) => {
          await world.reset();
          const records = deliveryRecords(world.log);
          let scheduled = 0;
          for (const { steps, indexed, asked } of rounds) {
            await appendHistory(records, steps, () => `d${(scheduled += 1)}`);
            await world.feed.applyNext(indexed);
            const ids = [...new Set(asked.map((n) => `d${(n % (scheduled + 2)) + 1}`))];
            const whole = await wholeStream(world.log);
            const found = await deliveriesNow(world.index, world.log, 's', ids);
            expect([...found.keys()].sort()).to.deep.equal(ids.filter((id) => whole.has(id)).sort());
            for (const [id, delivery] of found) expect(delivery, id).to.deep.equal(whole.get(id));
          }
        }),
        { numRuns: 30 },
      );
    });

    it('does not find a delivery the index pruned past the retention (the log still has it)', async () => {
      const records = deliveryRecords(world.log);
      // Fanned out and past the checkpoint, as a settled delivery must be to be pruned.
      await records.append([...records.schedule('old', { fannedOutThrough: 5 }), ...records.attempt('old', 'failed')]);
      await world.feed.applyNext();
      expect(await world.index.prune(1_000, 100)).to.equal(1);
      expect([...(await deliveriesNow(world.index, world.log, 's', ['old'])).keys()]).to.deep.equal([]);
      expect((await wholeStream(world.log)).get('old')?.status).to.equal('failed');
    });
  });
}

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'u'.repeat(32);
const REPLAY = 'r'.repeat(32);

for (const where of ['the index', 'the log alone'] as const) {
  describe(`a replay driven by a dispatcher that reads its deliveries from ${where} (int, real SQLite log)`, function () {
    this.timeout(20_000);
    let dir: string;
    let log: SqliteEventLog;
    let index: DeliveryIndex;
    let directory: SubscriptionDirectory;
    let dispatcher: Dispatcher | undefined;
    /** Each stream read of the drive. */
    let streamReads: readonly StreamRead[];
    const sent: DeliveryRequest[] = [];

    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'replay-driver-lookup-'));
      log = openSqliteLog({ file: join(dir, 'events.sqlite'), durability: 'relaxed' });
      index = openSqliteDeliveryIndex({ file: join(dir, 'history.sqlite') });
      directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
      sent.length = 0;
    });
    afterEach(async () => {
      await dispatcher?.stop();
      dispatcher = undefined;
      await Promise.all([log.close(), index.close()]);
      rmSync(dir, { recursive: true, force: true });
    });

    /** A live history of `count` settled deliveries (of events the replay does not cover), as records of 50. */
    const liveHistory = async (count: number): Promise<void> => {
      const steps = deliverySteps(Date.now() * 1000);
      for (let i = 0; i < count; i += 50) {
        const ids = Array.from({ length: Math.min(50, count - i) }, (_, k) => `old${i + k}`);
        const decided = ids.flatMap((id) => [...steps.schedule(SUBSCRIPTION, id), ...steps.attempt(id, 'delivered')]);
        await log.append(deliveryStream(SUBSCRIPTION), [{ id: `h${i}`, workspaceId: WORKSPACE, ...packSteps(decided) }], 'any');
      }
    };

    /** Applies every delivery record but the last `unapplied` to the index. */
    const indexAllBut = async (unapplied: number): Promise<void> => {
      const all = await log.readAll({ after: 0, types: DELIVERY_INDEX_TYPES });
      for (const event of all.slice(0, all.length - unapplied)) await index.apply(event);
    };

    /** Drives the replay to its end on a started dispatcher reading from `where` (the index through `through`). */
    const drive = async (replay: Replay, through: DeliveryIndex = index): Promise<string> => {
      const { log: reads, reads: done } = watched(log);
      streamReads = done;
      const deps = recordingDeps(log, directory, sent);
      dispatcher = createDispatcher({
        ...deps,
        log: reads,
        ...(where === 'the index' ? { records: recordsFromIndex(reads, through, async () => ({ deliveries: [], fannedOutThrough: 0 })) } : {}),
      });
      dispatcher.start();
      return driveReplay({ log: reads, subscriptions: directory, dispatcher, clock: () => Date.now() * 1000, keep: async () => true, stopped: () => false }, WORKSPACE, replay);
    };
    /** The revisions the subscription's delivery stream was read from. */
    const deliveryStreamReads = (): number[] => streamReads.filter((read) => read.stream === deliveryStream(SUBSCRIPTION)).map((read) => read.fromRevision);

    const events = async (): Promise<RecordedEvent[]> => log.readAll({ after: 0, types: ['ticket.created'] });

    it('continues without scheduling again what the stopped driver scheduled, though the index had not applied it', async () => {
      await liveHistory(500);
      const replay = await requestReplay(log, WORKSPACE, SUBSCRIPTION, REPLAY, 3);
      const [first, ...rest] = await events();
      await recordDelivery(log, first as RecordedEvent, { subscriptionId: SUBSCRIPTION, deliveryId: replayDeliveryIdOf((first as RecordedEvent).id, SUBSCRIPTION, REPLAY), fannedOutThrough: 0, delivered: true, replayId: REPLAY });
      await indexAllBut(1);
      expect(await drive(replay)).to.equal('finished');
      await eventually('the two others sent', () => sent.length === 2);
      await settle(200);
      expect(sent.map((request) => request.deliveryId).sort()).to.deep.equal(rest.map((event) => replayDeliveryIdOf(event.id, SUBSCRIPTION, REPLAY)).sort());
      expect((await currentReplay(log, REPLAY)).matched).to.equal(3);
      if (where === 'the index') expect(deliveryStreamReads(), 'no read of the stream from its first record').to.not.include(0);
      else expect(deliveryStreamReads()).to.include(0);
    });

    if (where === 'the index')
      it("paces itself by its own deliveries, never reading the subscription's other waiting ones (a receiver down: thousands)", async () => {
        const steps = deliverySteps(Date.now() * 1000);
        for (let i = 0; i < 2_000; i += 100) {
          const decided = Array.from({ length: 100 }, (_, k) => steps.schedule(SUBSCRIPTION, `backlog${i + k}`)).flat();
          await log.append(deliveryStream(SUBSCRIPTION), [{ id: `b${i}`, workspaceId: WORKSPACE, ...packSteps(decided) }], 'any');
        }
        const replay = await requestReplay(log, WORKSPACE, SUBSCRIPTION, REPLAY, 20);
        await indexAllBut(0);
        const whole: string[] = [];
        const watchedIndex: DeliveryIndex = { ...index, waitingOf: (subscriptionId) => (whole.push(subscriptionId), index.waitingOf(subscriptionId)) };
        expect(await drive(replay, watchedIndex)).to.equal('finished');
        await eventually('every replayed delivery sent', () => sent.length === 20);
        expect(new Set(sent.map((request) => request.deliveryId)).size).to.equal(20);
        expect(whole, 'no read of every waiting delivery').to.deep.equal([]);
        expect(deliveryStreamReads()).to.not.include(0);
      });

    it('with only_failed, sends again the events whose live delivery ended failed, under either id shape, also one the index had not applied', async () => {
      await liveHistory(200);
      const replay = await requestReplay(log, WORKSPACE, SUBSCRIPTION, REPLAY, 4, { onlyFailed: true });
      const [failedApplied, delivered, failedLegacy, failedUnapplied] = (await events()) as [RecordedEvent, RecordedEvent, RecordedEvent, RecordedEvent];
      const live = { subscriptionId: SUBSCRIPTION, fannedOutThrough: 0 };
      await recordDelivery(log, failedApplied, { ...live, deliveryId: deliveryIdOf(failedApplied.id, SUBSCRIPTION), delivered: false, failed: true });
      await recordDelivery(log, delivered, { ...live, deliveryId: deliveryIdOf(delivered.id, SUBSCRIPTION), delivered: true });
      await recordDelivery(log, failedLegacy, { ...live, deliveryId: legacyDeliveryIdOf(failedLegacy.id, SUBSCRIPTION), delivered: false, failed: true });
      await recordDelivery(log, failedUnapplied, { ...live, deliveryId: deliveryIdOf(failedUnapplied.id, SUBSCRIPTION), delivered: false, failed: true });
      await indexAllBut(1);
      expect(await drive(replay)).to.equal('finished');
      await eventually('the three failed ones sent again', () => sent.length === 3);
      await settle(200);
      expect(sent.map((request) => request.deliveryId).sort()).to.deep.equal([failedApplied, failedLegacy, failedUnapplied].map((event) => replayDeliveryIdOf(event.id, SUBSCRIPTION, REPLAY)).sort());
      expect((await currentReplay(log, REPLAY)).matched).to.equal(3);
      if (where === 'the index') expect(deliveryStreamReads()).to.not.include(0);
    });
  });
}
