// A replay continued by another dispatcher (its driver died, its lease ran out) over a shared retry
// schedule in Redis and one SQLite log, in this process. A dispatcher records a replayed delivery
// before it puts the first attempt in the schedule: the driver that continues the replay must take
// up what its predecessor recorded and never put, or nothing ever attempts it (and each such delivery
// holds a place of the replay's window for good). Pending unless REDIS_URL.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { unpackSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream, replayDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import type { Replay } from '../../src/domain/replay/replay.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { driveReplay } from '../../src/webhooks/dispatch/replay-driver.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { currentReplay as currentReplayOf, oneSubscription, recordingDeps, requestReplay as requestReplayOf } from '../support/dispatcher-fixture.js';
import { eventually } from '../support/webhooks-dispatch.js';

const redisUrl = process.env['REDIS_URL'];
const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'p'.repeat(32);
const REPLAY = 'r'.repeat(32);

(redisUrl ? describe : describe.skip)('a replay continued by another dispatcher over a shared schedule (int, Redis, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let directory: SubscriptionDirectory;
  let schedule: SharedRetrySchedule;
  const dispatchers: Dispatcher[] = [];
  const sent: DeliveryRequest[] = [];

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-replay-takeover-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    schedule = createRedisRetrySchedule({ url: redisUrl as string, leaseMs: 10_000, keyPrefix: `test:${path.basename(dir)}:` });
    await schedule.ready();
    sent.length = 0;
  });

  afterEach(async () => {
    for (const dispatcher of dispatchers.splice(0)) await dispatcher.stop();
    await schedule.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A dispatcher on the shared schedule, as `shared` lets it see it. */
  const dispatcher = (shared: SharedRetrySchedule): Dispatcher => {
    const created = createDispatcher({ ...recordingDeps(log, directory, sent), schedule: { shared } });
    dispatchers.push(created);
    return created;
  };

  const requestReplay = (count: number): Promise<Replay> => requestReplayOf(log, WORKSPACE, SUBSCRIPTION, REPLAY, count);
  const currentReplay = (): Promise<Replay> => currentReplayOf(log, REPLAY);

  /** Drives the replay on `driver`, for at most `rounds` pages (then its lease is lost). */
  const drive = (driver: Dispatcher, replay: Replay, rounds = Infinity) =>
    driveReplay({ log, subscriptions: directory, dispatcher: driver, clock: () => Date.now() * 1000, keep: async () => rounds-- > 0, stopped: () => false }, WORKSPACE, replay);

  /** Each replayed delivery id of the log's events, sorted. */
  const replayedIds = async (): Promise<string[]> =>
    (await log.readAll({ after: 0, types: ['ticket.created'] })).map((e: RecordedEvent) => replayDeliveryIdOf(e.id, SUBSCRIPTION, REPLAY)).sort();

  const scheduledSteps = async (): Promise<number> => (await log.readStream(deliveryStream(SUBSCRIPTION))).flatMap(unpackSteps).filter((step) => step.type === 'delivery.scheduled').length;

  it('sends each replayed delivery that the dead driver recorded and never put in the schedule, once, and completes the replay', async () => {
    const EVENTS = 3;
    const replay = await requestReplay(EVENTS);
    const killed = dispatcher({ ...schedule, put: () => Promise.reject(new Error('killed before its put')), putAndTake: () => Promise.reject(new Error('killed before its put')) });
    const outcome = await drive(killed, replay).then(String, (error: unknown) => String(error));
    expect(outcome).to.contain('killed before its put');
    expect(await scheduledSteps(), 'every replayed delivery recorded').to.equal(EVENTS);
    expect(await schedule.size(), 'none in the schedule').to.equal(0);

    const survivor = dispatcher(schedule);
    survivor.start();
    expect(await drive(survivor, await currentReplay())).to.equal('finished');
    await eventually('every replayed delivery sent', () => sent.length === EVENTS, 5_000);
    expect(sent.map((r) => r.deliveryId).sort()).to.deep.equal(await replayedIds());
    expect(await scheduledSteps(), 'none recorded twice').to.equal(EVENTS);
    expect((await currentReplay()).status).to.equal('completed');
    await eventually('the schedule empty', async () => (await schedule.size()) === 0, 5_000);
  });

  it('leaves alone what the dead driver did put in the schedule: each replayed delivery goes out once', async () => {
    // More than the replay's window: the first page is put, then the driver loses its lease.
    const EVENTS = 12;
    const replay = await requestReplay(EVENTS);
    // It takes nothing from the schedule (a put takes, and kicks its pump, even unstarted): its
    // entries stay unclaimed, as a driver's that died after its puts.
    const first = dispatcher({ ...schedule, takeDue: async () => [], putAndTake: async (entries) => (await schedule.put(...entries), []) });
    expect(await drive(first, replay, 1)).to.equal('interrupted');
    const put = await scheduledSteps();
    expect(put).to.be.within(1, EVENTS - 1);
    expect(await schedule.size()).to.equal(put);
    const survivor = dispatcher(schedule);
    survivor.start();
    expect(await drive(survivor, await currentReplay())).to.equal('finished');
    await eventually('every replayed delivery sent', () => sent.length === EVENTS, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sent.map((r) => r.deliveryId).sort()).to.deep.equal(await replayedIds());
    expect(await scheduledSteps()).to.equal(EVENTS);
  });
});
