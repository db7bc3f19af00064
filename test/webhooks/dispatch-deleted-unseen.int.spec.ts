// A dispatcher whose subscription directory never saw a deletion. In the distributed mode the
// directory of each dispatcher tails the shared SQLite file by polling it; the DELETE route appends
// the deletion marker and then deletes the subscription's stream, marker included, a moment later, so
// a poll that comes after both finds no marker and the directory keeps the subscription (found by the
// distributed crash torture: thousands of deliveries to deleted subscriptions, minutes after their
// DELETE). The dispatcher must not send to a subscription whose stream is gone from the log.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { appendPublicEvent, oneSubscription, recordingDeps, type DispatcherDeps } from '../support/dispatcher-fixture.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('dispatcher: a subscription deleted behind its directory (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher;
  let dispatcherDeps: DispatcherDeps;
  const sent: DeliveryRequest[] = [];
  let n = 0;
  /** Set once the directory has applied the deletion (the second case). */
  let deletedInDirectory = false;

  /** A public event of the workspace, as the bus hands it over. */
  const publicEvent = (): Promise<RecordedEvent> => appendPublicEvent(log, WORKSPACE, ++n);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-unseen-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    // The directory that missed the marker: it keeps the subscription whatever the log says.
    const directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION, () => !deletedInDirectory);
    sent.length = 0;
    deletedInDirectory = false;
    dispatcherDeps = recordingDeps(log, directory, sent);
    dispatcher = createDispatcher(dispatcherDeps);
    dispatcher.start();
  });

  afterEach(async () => {
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends while the subscription exists, and nothing once its stream is deleted', async () => {
    await dispatcher.fanOut(await publicEvent());
    await settle(200);
    expect(sent, 'the delivery before the deletion').to.have.length(1);

    await log.deleteStream(subscriptionStream(SUBSCRIPTION));
    for (let i = 0; i < 3; i++) await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent, 'deliveries after the deletion').to.have.length(1);
    // Nor is the deleted subscription's delivery history written again.
    expect(await log.readStream(deliveryStream(SUBSCRIPTION))).to.deep.equal([]);
  });

  it('sends nothing when the deletion is applied while an attempt is being prepared', async () => {
    // The attempt looks the subscription up, then reads its stream: the DELETE lands in between.
    const readStream = log.readStream.bind(log);
    log.readStream = async (stream, from) => {
      const events = await readStream(stream, from);
      if (stream === subscriptionStream(SUBSCRIPTION)) deletedInDirectory = true;
      return events;
    };
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent, 'deliveries after the deletion was applied').to.have.length(0);
  });

  it('sends nothing when told of the deletion while an attempt is being prepared, before the directory applies it', async () => {
    // A DELETE answered on another server tells the dispatcher (Redis) after the attempt read the
    // subscription's stream: its directory, tailing the log, has not met the marker yet.
    const readStream = log.readStream.bind(log);
    log.readStream = async (stream, from) => {
      const events = await readStream(stream, from);
      if (stream === subscriptionStream(SUBSCRIPTION)) void dispatcher.subscriptionDeleted(SUBSCRIPTION);
      return events;
    };
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent, 'deliveries after the dispatcher was told').to.have.length(0);
  });

  describe('an attempt whose look at the log grew old before its write', () => {
    /** How old a look may be in these cases (the default is half the DELETE's bound: a second). */
    const LOOK_VALID_MS = 100;
    /** A sender that asks `wanted` as the real one does just before writing (after `connectMs`), and records what it writes. */
    const askingSender = (connectMs: number) => ({
      send: (request: DeliveryRequest) =>
        new Promise((resolve) =>
          setTimeout(() => {
            if (request.wanted?.() === false) return resolve({ delivered: false, statusCode: null, error: 'cancelled', latencyMs: 1 });
            sent.push(request);
            resolve({ delivered: true, statusCode: 200, error: null, latencyMs: 1 });
          }, connectMs),
        ),
      close: async () => undefined,
    });
    const withSender = async (connectMs: number) => {
      await dispatcher.stop();
      dispatcher = createDispatcher({ ...dispatcherDeps, lookValidMs: LOOK_VALID_MS, sender: askingSender(connectMs) as never });
      dispatcher.start();
    };
    /**
     * At the attempt's first look at the subscription's stream, once it is read: `meanwhile`, then a
     * stall of this thread's event loop (a long synchronous task, a descheduled process). Returns how
     * many looks there were so far.
     */
    const stallAfterFirstLook = (meanwhile: () => Promise<void> = async () => undefined): (() => number) => {
      const readStream = log.readStream.bind(log);
      let looks = 0;
      log.readStream = async (stream, from) => {
        const events = await readStream(stream, from);
        if (stream !== subscriptionStream(SUBSCRIPTION) || looks++ > 0) return events;
        await meanwhile();
        const until = performance.now() + 3 * LOOK_VALID_MS;
        while (performance.now() < until);
        return events;
      };
      return () => looks;
    };

    it('sends nothing when the process stalled between the look and the write while the subscription was deleted (a DELETE that waited out its bound)', async () => {
      await withSender(0);
      // The look reads the stream before the deletion; the DELETE (another process) then appends its
      // marker and removes the stream, and this process stalls: its directory has applied none of it
      // when the attempt resumes.
      const looks = stallAfterFirstLook(() => log.deleteStream(subscriptionStream(SUBSCRIPTION)));
      await dispatcher.fanOut(await publicEvent());
      await settle(300);
      expect(sent, 'deliveries written after the stall').to.have.length(0);
      expect(looks(), 'the attempt looked again').to.equal(2);
    });

    it('sends when the look is older but the event loop kept running (a connection slow to open): the directory was current', async () => {
      await withSender(3 * LOOK_VALID_MS);
      await dispatcher.fanOut(await publicEvent());
      await settle(3 * LOOK_VALID_MS + 300);
      expect(sent, 'the delivery').to.have.length(1);
    });

    it('sends after a stall that deleted nothing, once it has looked again', async () => {
      await withSender(0);
      const looks = stallAfterFirstLook();
      await dispatcher.fanOut(await publicEvent());
      await settle(300);
      expect(sent, 'the delivery, once').to.have.length(1);
      expect(looks()).to.equal(2);
    });
  });

  it('cancels the attempts in flight to a subscription as it is deleted', async () => {
    let cancelled = 0;
    // An endpoint that does not answer: the attempt stays in flight until cancelled.
    await dispatcher.stop();
    dispatcher = createDispatcher({
      ...dispatcherDeps,
      schedule: { own: createMemoryRetrySchedule() },
      sender: {
        send: (request: DeliveryRequest, onStart?: (cancel: () => void) => void) =>
          new Promise((resolve) => {
            sent.push(request);
            onStart?.(() => {
              cancelled++;
              resolve({ delivered: false, statusCode: null, error: 'cancelled', latencyMs: 1 });
            });
          }),
        close: async () => undefined,
      } as never,
    });
    dispatcher.start();
    await dispatcher.fanOut(await publicEvent());
    await settle(200);
    expect(sent).to.have.length(1);
    await dispatcher.subscriptionDeleted(SUBSCRIPTION);
    expect(cancelled).to.equal(1);
  });

  it('sends nothing once the deletion marker is in the log, before the stream is gone', async () => {
    await log.append(subscriptionStream(SUBSCRIPTION), [{ id: 'd'.repeat(32), type: SUBSCRIPTION_EVENTS.deleted, workspaceId: WORKSPACE, data: {} }], 'any');
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent, 'deliveries after the deletion marker').to.have.length(0);
  });
});
