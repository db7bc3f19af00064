// What the benchmarks of a dead receiver's backlog share (takeover, deactivation, replay-backlog,
// deletion): a private Redis (the bench's own port) for a retry schedule and a delivery history index
// beside a SQLite log, dispatchers on them whose receiver answers in process, and the backlog a first
// dispatcher leaves behind against a receiver that refuses every attempt; or the embedded default's
// dispatcher with its backlog parked.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { foldDeliveries } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { NewEvent, RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { createDispatcher, type DeliveryRecords, type Dispatcher, type DispatcherDeps } from '../../src/webhooks/dispatch/dispatcher.js';
import { openParkingLot, PARKING_LIMITS, type ParkingLot } from '../../src/webhooks/dispatch/parking.js';
import { createHistoryIndexer, type HistoryIndexer } from '../../src/webhooks/dispatch/history-index.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import type { AttemptOutcome, DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { recordingDeps, subscriptionsOf } from '../../test/support/dispatcher-fixture.js';
import { engine as engines } from './engines.js';
import { round } from './fanout.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const REDIS_PORT = 6398;
export const URL = `redis://127.0.0.1:${REDIS_PORT}`;
export const engine = engines({ kafka: 0, redis: REDIS_PORT });
export const WORKSPACE = 'w'.repeat(32);
export const SUBSCRIPTION = 't'.repeat(32);
/** Every retry is due this long after its first attempt. */
export const RETRY_MS = 3_600_000;
const BATCH = 1_000;
/** Fan-outs under way at once. */
const WINDOW = 256;

export const heapAfterGc = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};
export const mb = (bytes: number): number => round(bytes / 1024 / 1024, 0);

/** What a run's two dispatchers share. */
export interface Run {
  /** The data folder: the log is its events.sqlite, as a role's. */
  readonly dir: string;
  readonly log: SqliteEventLog;
  readonly indexer: HistoryIndexer;
  readonly directory: SubscriptionDirectory;
  readonly records: DeliveryRecords;
  readonly schedule: SharedRetrySchedule;
}

/** A dispatcher of the run whose receiver, in process, answers `outcome` at once; its requests are counted in `sent`. */
export const dispatcherOf = (run: Run, outcome: AttemptOutcome, sent: { n: number }, deps: Partial<DispatcherDeps> = {}) =>
  createDispatcher({
    ...recordingDeps(run.log, run.directory, []),
    sender: { send: async (_request: DeliveryRequest) => ((sent.n += 1), outcome), close: async () => undefined } as never,
    schedule: { shared: run.schedule },
    records: run.records,
    retryDelaysMs: [RETRY_MS],
    maxInFlight: 64,
    maxInFlightPerSubscription: 64,
    maxInFlightPerWorkspace: 64,
    ...deps,
  });

/** What a dead receiver answers. */
export const REFUSED: AttemptOutcome = { delivered: false, statusCode: 503, error: null, latencyMs: 1 };

/** Appends `events` public events of the workspace and fans each out through `dispatcher`, WINDOW at a time. */
export const fanOutMany = async (log: SqliteEventLog, dispatcher: Dispatcher, events: number): Promise<void> => {
  const appended: RecordedEvent[] = [];
  for (let n = 0; n < events; n += BATCH) {
    const batch: NewEvent[] = Array.from({ length: Math.min(BATCH, events - n) }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId: WORKSPACE, data: { ticket_id: randomId() } }));
    appended.push(...(await log.append(`bench-${randomId()}`, batch, 'any')).records);
  }
  for (let i = 0; i < appended.length; i += WINDOW) await Promise.all(appended.slice(i, i + WINDOW).map((event) => dispatcher.fanOut(event, event.position)));
};

/**
 * A first dispatcher fans `events` events out to a receiver that refuses them all and stops once each
 * first attempt is recorded failed and the index has applied it. What it held is garbage once this returns.
 */
export const backlog = async (run: Run, events: number): Promise<void> => {
  const { log, indexer } = run;
  const refused = { n: 0 };
  const first = dispatcherOf(run, REFUSED, refused);
  first.start();
  await fanOutMany(log, first, events);
  while (refused.n < events) await sleep(100);
  await first.stop();
  await indexer.runner.waitFor(await log.headPosition());
  const waiting = [...foldDeliveries(await log.readStream(deliveryStream(SUBSCRIPTION))).values()].filter((d) => d.status === 'waiting' && d.attempt === 1).length;
  if (waiting !== events) throw new Error(`${waiting} of ${events} deliveries waiting for their retry`);
};

/**
 * `work` on a fresh SQLite log, delivery history index and shared schedule (keys of their own in the
 * bench's Redis), all let go after it. `asRole`: the log open to other connections and the keys a
 * role uses, for a role's threads to open them too.
 */
export const withRun = async <T>(work: (run: Run) => Promise<T>, { asRole = false } = {}): Promise<T> => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-takeover-'));
  const log = openSqliteLog({ file: path.join(dir, 'events.sqlite'), durability: 'relaxed', shared: asRole });
  const prefix = asRole ? '' : `bench-${randomId()}:`;
  const index = openRedisDeliveryIndex({ url: URL, keyPrefix: prefix });
  const indexer = createHistoryIndexer(log, index, { retentionMs: 86_400_000, clock: () => Date.now() * 1000 });
  const schedule = createRedisRetrySchedule({ url: URL, leaseMs: 60_000, keyPrefix: prefix });
  try {
    await indexer.start();
    await schedule.ready();
    const directory = await subscriptionsOf(log, WORKSPACE, [SUBSCRIPTION]);
    return await work({ dir, log, indexer, directory, records: recordsForKafka(log, index, () => indexer.pending()), schedule });
  } finally {
    await schedule.close();
    await indexer.stop();
    // The role's keys hold the schedule's too, which clear leaves.
    await (asRole ? index.client.flushall() : index.clear());
    await index.close();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

/** As a dispatcher role starts: what the index says waits, read whole, let go once offered. Resolves with how long that took (ms). */
export const restart = async (run: Run, dispatcher: Dispatcher): Promise<number> => {
  const started = performance.now();
  const pending = await run.indexer.pending();
  await dispatcher.resume(pending.deliveries, pending.fannedOutThrough);
  return round(performance.now() - started, 0);
};

/** The longest gap between ticks of the event loop (every 10 ms), a full GC's own time left out, and the most heap retained over `before` (sampled every 250 ms), until stopped. */
export const watchLoop = (before: number) => {
  let last = performance.now();
  let ticks = 0;
  let heldMs = 0;
  let heap = 0;
  const timer = setInterval(() => {
    heldMs = Math.max(heldMs, performance.now() - last - 10);
    if (++ticks % 25 === 0) heap = Math.max(heap, heapAfterGc() - before);
    last = performance.now();
  }, 10);
  return {
    stop() {
      clearInterval(timer);
      return { heldMs: round(heldMs, 0), heapMb: mb(heap) };
    },
  };
};

/** The embedded default's dispatcher (its own schedule, its parking lot as PARKING_LIMITS has it) and what it runs on. */
export interface ParkedBacklog {
  readonly log: SqliteEventLog;
  readonly lot: ParkingLot;
  readonly dispatcher: Dispatcher;
}

/**
 * `work` once the embedded default's dispatcher, on a fresh SQLite log, fanned `events` events out to
 * SUBSCRIPTION, whose receiver refused every first attempt, and parked every retry (due an hour
 * later); all let go after it.
 */
export const withParkedBacklog = async <T>(events: number, work: (parked: ParkedBacklog) => Promise<T>): Promise<T> => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-parked-'));
  const log = openSqliteLog({ file: path.join(dir, 'events.sqlite'), durability: 'relaxed' });
  const lot = openParkingLot(path.join(dir, 'parked.sqlite'));
  const refused = { n: 0 };
  const dispatcher = createDispatcher({
    ...recordingDeps(log, await subscriptionsOf(log, WORKSPACE, [SUBSCRIPTION]), []),
    sender: { send: async (_request: DeliveryRequest) => ((refused.n += 1), REFUSED), close: async () => undefined } as never,
    retryDelaysMs: [RETRY_MS],
    maxInFlight: 64,
    maxInFlightPerSubscription: 64,
    maxInFlightPerWorkspace: 64,
    parking: { lot, ...PARKING_LIMITS },
  });
  try {
    dispatcher.start();
    await fanOutMany(log, dispatcher, events);
    while (refused.n < events || lot.size() < events) await sleep(100);
    return await work({ log, lot, dispatcher });
  } finally {
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  }
};
