// A dispatcher with a parking lot holds only what is due soon: a dead receiver's retries wait in the
// lot, not in memory, and come back before they are due; a slow subscription's first attempts past
// its share wait there in order while a quiet subscription's are held as usual; a deactivation
// cancels the parked ones, a deletion forgets them, a parked one comes back as it was parked without a
// read, and a restart parks what it restores. Real SQLite log and lot.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { foldDeliveries, type Delivery } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, recordsFromLog, type Dispatcher, type Parking } from '../../src/webhooks/dispatch/dispatcher.js';
import { openParkingLot, type ParkingLot } from '../../src/webhooks/dispatch/parking.js';
import { readDeliveryHistory } from '../../src/webhooks/dispatch/restore.js';
import type { AttemptOutcome, DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../../src/webhooks/subscriptions.js';
import { appendPublicEvent, recordingDeps, subscriptionsOf, type DispatcherDeps } from '../support/dispatcher-fixture.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SLOW = 'p'.repeat(32);
const QUIET = 'q'.repeat(32);
const EVENTS = 30;
const OK: AttemptOutcome = { delivered: true, statusCode: 200, error: null, latencyMs: 1 };
const DOWN: AttemptOutcome = { delivered: false, statusCode: 503, error: null, latencyMs: 1 };

interface Sent {
  readonly request: DeliveryRequest;
  readonly at: number;
}

describe('dispatcher: attempts parked out of memory (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let lot: ParkingLot;
  let directory: SubscriptionDirectory;
  let dispatcher: Dispatcher | null;
  let sent: Sent[];
  /** What the receiver answers each request; a promise holds the request until it settles. */
  let answer: (request: DeliveryRequest) => AttemptOutcome | Promise<AttemptOutcome>;

  const streamDeliveries = async (subscriptionId: string): Promise<Delivery[]> => [...foldDeliveries(await log.readStream(deliveryStream(subscriptionId))).values()];
  const sentTo = (subscriptionId: string): Sent[] => sent.filter((s) => s.request.url === `http://127.0.0.1:9/${subscriptionId}`);

  const start = (parking: Omit<Parking, 'lot'>, deps: Partial<DispatcherDeps> = {}): Dispatcher => {
    const started = createDispatcher({
      ...recordingDeps(log, directory, []),
      sender: {
        send: async (request: DeliveryRequest) => {
          sent.push({ request, at: Date.now() });
          return answer(request);
        },
        close: async () => undefined,
      } as never,
      maxInFlightPerSubscription: 2,
      parking: { lot, ...parking },
      ...deps,
    });
    started.start();
    dispatcher = started;
    return started;
  };

  /** Appends `events` public events numbered from `from`, then fans each out in turn. */
  const fanOut = async (events: number, from = 1): Promise<RecordedEvent[]> => {
    const appended: RecordedEvent[] = [];
    for (let n = from; n < from + events; n++) appended.push(await appendPublicEvent(log, WORKSPACE, n));
    for (const event of appended) await dispatcher?.fanOut(event);
    return appended;
  };

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-parking-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    lot = openParkingLot(path.join(dir, 'parked.sqlite'));
    directory = await subscriptionsOf(log, WORKSPACE, [SLOW]);
    // Each subscription's own address, so that the test tells their requests apart.
    for (const id of [SLOW, QUIET]) {
      const row = directory.get(WORKSPACE, id) as (SubscriptionRow & { url: string }) | undefined;
      if (row !== undefined) row.url = `http://127.0.0.1:9/${id}`;
    }
    sent = [];
    answer = () => OK;
    dispatcher = null;
  });

  afterEach(async () => {
    // The dispatcher closes the lot it was given; one never started leaves it to the test.
    if (dispatcher === null) lot.close();
    else await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("parks a dead receiver's retries, holds none of them, and sends each once it is due after the receiver recovers", async () => {
    answer = () => DOWN;
    start({ horizonMs: 400, maxHeld: 1_000, heldPerSubscription: 100 }, { retryDelaysMs: [1_500, 1_500] });
    await fanOut(EVENTS);
    await eventually('every first attempt failed and parked its retry', () => lot.size() === EVENTS);
    const backlog = await (dispatcher as Dispatcher).backlog();
    // Counted where they wait: all of them, none in the schedule.
    expect(backlog.waiting).to.equal(EVENTS);
    expect(backlog.oldestDueAt).to.equal(lot.earliestDue());
    const failedAt = new Map(sent.map((s) => [s.request.deliveryId, s.at]));
    answer = () => OK;
    await eventually('every retry delivered', async () => (await streamDeliveries(SLOW)).filter((d) => d.status === 'delivered').length === EVENTS, 10_000);
    const retries = sent.filter((s) => s.request.attempt === 2);
    expect(retries.map((s) => s.request.deliveryId).sort()).to.deep.equal([...failedAt.keys()].sort());
    // Not one before its due time, though it was back in memory before that.
    for (const retry of retries) expect(retry.at - (failedAt.get(retry.request.deliveryId) as number)).to.be.at.least(1_500 - 5);
    expect(lot.size()).to.equal(0);
  });

  it("parks a slow subscription's first attempts past its share and sends them in order, while a quiet subscription's are not parked", async () => {
    directory = await subscriptionsOf(log, WORKSPACE, [SLOW, QUIET]);
    for (const id of [SLOW, QUIET]) (directory.get(WORKSPACE, id) as SubscriptionRow & { url: string }).url = `http://127.0.0.1:9/${id}`;
    const waiting: (() => void)[] = [];
    answer = (request) => (request.url.endsWith(SLOW) ? new Promise((resolve) => waiting.push(() => resolve(OK))) : OK);
    start({ horizonMs: 10_000, maxHeld: 10, heldPerSubscription: 4 });
    const events = await fanOut(EVENTS);
    await eventually("the quiet subscription's deliveries all sent", () => sentTo(QUIET).length === EVENTS);
    expect(lot.firsts(QUIET)).to.equal(0);
    const parked = lot.firsts(SLOW);
    expect(parked).to.be.greaterThan(EVENTS / 2);
    // Two answered: the dispatcher holds fewer than maxHeld again, yet an event's new first attempt
    // goes behind those parked before it, not ahead of them.
    waiting.splice(0, 2).forEach((release) => release());
    await eventually('the next two sent', () => sentTo(SLOW).length === 4);
    events.push(...(await fanOut(1, EVENTS + 1)));
    expect(lot.firsts(SLOW)).to.equal(parked + 1);
    // The receiver answers from now on, and those it held.
    answer = () => OK;
    waiting.forEach((release) => release());
    await eventually('every delivery of the slow subscription delivered', async () => (await streamDeliveries(SLOW)).filter((d) => d.status === 'delivered').length === EVENTS + 1, 10_000);
    const bodies = sentTo(SLOW).map((s) => (JSON.parse(s.request.body.toString('utf8')) as { id: string }).id);
    expect(bodies, 'each sent once, in the order of the events').to.deep.equal(events.map((e) => e.id));
    expect(lot.size()).to.equal(0);
  });

  it('cancels the parked deliveries of a deactivated subscription', async () => {
    answer = () => DOWN;
    start({ horizonMs: 400, maxHeld: 1_000, heldPerSubscription: 100 }, { retryDelaysMs: [60_000] });
    await fanOut(EVENTS);
    await eventually('every retry parked', () => lot.size() === EVENTS);
    (directory.get(WORKSPACE, SLOW) as SubscriptionRow & { isActive: boolean }).isActive = false;
    await (dispatcher as Dispatcher).subscriptionDeactivated(SLOW, Number.MAX_SAFE_INTEGER);
    expect(lot.size()).to.equal(0);
    await eventually('all recorded cancelled', async () => (await streamDeliveries(SLOW)).every((d) => d.status === 'cancelled'));
    expect((await (dispatcher as Dispatcher).backlog()).waiting).to.equal(0);
  });

  it('forgets the parked deliveries of a deleted subscription', async () => {
    answer = () => DOWN;
    start({ horizonMs: 400, maxHeld: 1_000, heldPerSubscription: 100 }, { retryDelaysMs: [60_000] });
    await fanOut(EVENTS);
    await eventually('every retry parked', () => lot.size() === EVENTS);
    await (dispatcher as Dispatcher).subscriptionDeleted(SLOW);
    expect(lot.size()).to.equal(0);
    expect((await (dispatcher as Dispatcher).backlog()).waiting).to.equal(0);
  });

  it('takes them back as it parked them, reading neither the index nor the delivery stream', async () => {
    const looked: string[] = [];
    const reads = recordsFromLog(log);
    const read = log.readStream.bind(log);
    log.readStream = (stream, ...rest) => {
      if (stream === deliveryStream(SLOW)) looked.push(stream);
      return read(stream, ...rest);
    };
    answer = () => DOWN;
    start(
      { horizonMs: 400, maxHeld: 1_000, heldPerSubscription: 100 },
      { retryDelaysMs: [800, 800], records: { ...reads, lookup: async (subscriptionId) => (looked.push('lookup'), reads.lookup(subscriptionId)), current: async (...args) => (looked.push('current'), reads.current(...args)) } },
    );
    await fanOut(EVENTS);
    answer = () => OK;
    // Read here without the watch.
    const delivered = async () => [...foldDeliveries(await read(deliveryStream(SLOW))).values()].filter((d) => d.status === 'delivered').length;
    await eventually('every retry delivered', async () => (await delivered()) === EVENTS, 10_000);
    expect(looked).to.deep.equal([]);
    expect(sent.filter((s) => s.request.attempt === 2)).to.have.length(EVENTS);
  });

  it('parks what a restart restores past its share, and delivers each once', async () => {
    // The first dispatcher holds every delivery (no lot); its receiver is down. Stopped, it leaves them waiting.
    const first = createDispatcher({ ...recordingDeps(log, directory, []), sender: { send: async () => DOWN, close: async () => undefined } as never, retryDelaysMs: [400, 400, 400, 400, 400] });
    first.start();
    dispatcher = first;
    await fanOut(EVENTS);
    await eventually('every first attempt recorded failed', async () => (await streamDeliveries(SLOW)).filter((d) => d.status === 'waiting' && d.attempt >= 1).length === EVENTS);
    await first.stop();
    // Their retries fall due while no dispatcher runs.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const restarted = start({ horizonMs: 10_000, maxHeld: 5, heldPerSubscription: 2 });
    const history = await readDeliveryHistory(log);
    await restarted.resume(history.deliveries, history.fannedOutThrough);
    expect(lot.size(), 'restored past the share, parked').to.be.greaterThan(EVENTS / 2);
    await eventually('every delivery delivered', async () => (await streamDeliveries(SLOW)).filter((d) => d.status === 'delivered').length === EVENTS, 10_000);
    expect(new Set(sent.map((s) => s.request.deliveryId)).size).to.equal(EVENTS);
    expect(sent).to.have.length(EVENTS);
    expect(lot.size()).to.equal(0);
  });
});
