// A deleted subscription's delivery history goes a batch at a time, so a process may stop part way
// (a close between batches here; a kill -9 in restart-after-delete.e2e). A note in the log says the
// deletion began and goes once it has ended; a dispatcher's start takes up what a note still names,
// and the histories of subscriptions it finds gone, in the background: the log's tail, which waits
// for the take-over, must not wait for a deletion that may take half a minute. Real SQLite log.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { foldDeliveries, unpackSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { legacyReplayStream, replayStream } from '../../src/domain/replay/replay.js';
import { LogUnavailable } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import {
  deleteHistoriesMeanwhile,
  deleteSubscriptionHistory,
  HISTORY_DELETION_EVENT,
  historyDeletionStream,
  unfinishedHistoryDeletions,
} from '../../src/webhooks/dispatch/subscription-history.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { appendPublicEvent, oneSubscription, recordDelivery, recordingDeps, requestReplay } from '../support/dispatcher-fixture.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const KEPT = 'k'.repeat(32);
const GONE = 'g'.repeat(32);

describe('deleting a subscription\'s delivery history, and taking up one stopped part way (int, SQLite)', function () {
  this.timeout(30_000);
  let dir: string;
  let file: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher | undefined;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-history-deletion-'));
    file = path.join(dir, 'events.sqlite');
    log = openSqliteLog({ file });
  });

  afterEach(async () => {
    await dispatcher?.stop();
    dispatcher = undefined;
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** `count` events in the subscription's delivery history (their shape does not matter to a deletion). */
  const history = async (subscriptionId: string, count: number): Promise<void> => {
    for (let n = 0; n < count; n += 500) {
      const events = Array.from({ length: Math.min(500, count - n) }, (_, i) => ({ id: `${subscriptionId.slice(0, 8)}${String(n + i).padStart(24, '0')}`, type: 'delivery.attempted', workspaceId: WORKSPACE, data: { n: n + i } }));
      await log.append(deliveryStream(subscriptionId), events, 'any');
    }
  };
  const left = async (subscriptionId: string): Promise<number> => (await log.readStream(deliveryStream(subscriptionId))).length;
  const notes = async () => log.readAll({ after: 0, types: [HISTORY_DELETION_EVENT] });
  /** The note of GONE's deletion, as a process killed part way leaves it. */
  const leftNote = () => log.append(historyDeletionStream(GONE), [{ id: 'n'.repeat(32), type: HISTORY_DELETION_EVENT, workspaceId: '', data: { subscription_id: GONE } }], 'any');

  it('deletes the history and the replays\' streams, and its note once done', async () => {
    await history(GONE, 600);
    const replay = await requestReplay(log, WORKSPACE, GONE, 'r'.repeat(32), 2);
    await log.append(legacyReplayStream(GONE), [{ id: 'l'.repeat(32), type: 'replay.progressed', workspaceId: WORKSPACE, data: {} }], 'any');
    await history(KEPT, 10);

    await deleteSubscriptionHistory(log, GONE);
    expect(await left(GONE)).to.equal(0);
    expect(await log.readStream(replayStream(replay.id))).to.deep.equal([]);
    expect(await log.readStream(legacyReplayStream(GONE))).to.deep.equal([]);
    expect(await log.readStream(historyDeletionStream(GONE)), 'the note').to.deep.equal([]);
    expect(await unfinishedHistoryDeletions(log)).to.deep.equal([]);
    expect(await left(KEPT), 'another subscription\'s history').to.equal(10);
  });

  it('leaves its note when stopped part way by a close, and the next start\'s sweep ends it', async () => {
    await history(GONE, 3_000);
    await history(KEPT, 10);
    const deleting = deleteSubscriptionHistory(log, GONE);
    // Newest first, a batch a transaction with a pause between: seen part way, then closed.
    while ((await log.lastRevision(deliveryStream(GONE))) === 2_999) await new Promise((resolve) => setTimeout(resolve, 1));
    await log.close();
    const stopped = await deleting.then(() => null, (error: unknown) => error);
    expect(stopped, 'the deletion stopped by the close').to.be.instanceOf(LogUnavailable);

    log = openSqliteLog({ file });
    const remaining = await left(GONE);
    expect(remaining, 'an earlier state of the history').to.be.within(1, 2_999);
    expect((await log.readStream(deliveryStream(GONE))).map((e) => e.revision)).to.deep.equal(Array.from({ length: remaining }, (_, i) => i));
    expect(await unfinishedHistoryDeletions(log)).to.deep.equal([GONE]);

    await deleteHistoriesMeanwhile(log, []);
    expect(await left(GONE)).to.equal(0);
    expect(await notes()).to.deep.equal([]);
    expect(await left(KEPT)).to.equal(10);
  });

  it('tells of a log closed under the sweep, and keeps the notes for the next start', async () => {
    await history(GONE, 3_000);
    await leftNote();
    const warned: string[] = [];
    const warn = console.warn;
    console.warn = (line: string) => warned.push(line);
    try {
      const sweep = deleteHistoriesMeanwhile(log, []);
      while ((await log.lastRevision(deliveryStream(GONE))) === 2_999) await new Promise((resolve) => setTimeout(resolve, 1));
      await log.close();
      await sweep;
    } finally {
      console.warn = warn;
    }
    expect(warned.join('\n')).to.match(/stopped deleting, the log is unavailable .*the next start goes on/);
    log = openSqliteLog({ file });
    expect(await unfinishedHistoryDeletions(log)).to.deep.equal([GONE]);
  });

  describe('a dispatcher starting', () => {
    const sent: DeliveryRequest[] = [];

    /** A dispatcher whose directory has KEPT alone, taking over `restored` as a restart does; `resumed` is its take-over. */
    const restart = async (restored: Parameters<Dispatcher['resume']>[0]): Promise<{ resumed: Promise<void> }> => {
      dispatcher = createDispatcher(recordingDeps(log, await oneSubscription(log, WORKSPACE, KEPT), sent));
      return { resumed: dispatcher.resume(restored, 0) };
    };

    it('takes up a deletion a stopped process left part way', async () => {
      await history(GONE, 1_200);
      // What a process killed after its first batches leaves: the note, and the history's beginning.
      await leftNote();
      await (await restart([])).resumed;
      await eventually('the history deleted', async () => (await left(GONE)) === 0);
      await eventually('the note gone', async () => (await notes()).length === 0);
    });

    it('ends its take-over while the history of a subscription it finds gone is still being deleted', async () => {
      const event = await appendPublicEvent(log, WORKSPACE, 1);
      await recordDelivery(log, event, { subscriptionId: GONE, deliveryId: 'd'.repeat(32), fannedOutThrough: 0, delivered: false });
      const waiting = [...foldDeliveries((await log.readStream(deliveryStream(GONE))).flatMap(unpackSteps)).values()];
      expect(waiting.map((d) => d.status)).to.deep.equal(['waiting']);
      // The history's deletion is held until released: a long one, as far as the take-over can tell.
      let release = (): void => undefined;
      const held = new Promise<void>((resolve) => (release = resolve));
      const deleteStream = log.deleteStream.bind(log);
      log.deleteStream = async (stream) => {
        if (stream === deliveryStream(GONE)) await held;
        return deleteStream(stream);
      };

      const { resumed } = await restart(waiting.map((delivery) => ({ delivery, workspaceId: WORKSPACE })));
      const first = await Promise.race([resumed.then(() => 'take-over ended'), new Promise((resolve) => setTimeout(() => resolve('held by the deletion'), 2_000))]);
      expect(first).to.equal('take-over ended');
      expect(await left(GONE), 'not deleted yet').to.equal(1);
      await eventually('its note', async () => (await unfinishedHistoryDeletions(log)).includes(GONE));

      release();
      await eventually('the history deleted', async () => (await left(GONE)) === 0);
      await eventually('the note gone', async () => (await notes()).length === 0);
      expect(sent, 'nothing sent to the gone subscription').to.deep.equal([]);
    });
  });
});
