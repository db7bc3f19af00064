// Distributed take-over benchmark: what a dispatcher sharing its retry schedule in Redis holds, and
// how fast it drains, when it takes over a dead receiver's backlog. `npm run bench -- takeover [--long]`.
//
// A private Redis (the bench's own port) holds the schedule and the delivery history index, beside a
// SQLite log. A first dispatcher fans 100,000 events (--long: 300,000) out to one subscription whose
// receiver refuses them all, and stops once each first attempt is recorded failed. A second one,
// started from the index as a dispatcher role starts, takes every retry over: its clock runs the retry
// delay ahead, so all of them are due at once, as after an outage, and its receiver answers at once
// (in process: the take-over's reads are what is measured, not HTTP). Done twice on fresh data: with
// every waiting delivery kept in its view (the ceiling: the behaviour before views were bounded) and
// as the dispatcher keeps them now (a view of at most WAITING_KEPT). Figures: the heap retained (after
// a full GC, sampled every 250 ms while it drains, the most over the heap before it started) and the
// drain's rate. The index is kept current in this process, on the same event loop (a dispatcher
// role keeps it in a thread of its own): the figures are a floor for the role.
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
import { createHistoryIndexer, type HistoryIndexer } from '../../src/webhooks/dispatch/history-index.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import { WAITING_KEPT } from '../../src/webhooks/dispatch/waiting.js';
import type { AttemptOutcome, DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { recordingDeps, subscriptionsOf } from '../../test/support/dispatcher-fixture.js';
import { engine as engines } from './engines.js';
import { round } from './fanout.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const REDIS_PORT = 6398;
const URL = `redis://127.0.0.1:${REDIS_PORT}`;
export const engine = engines({ kafka: 0, redis: REDIS_PORT });
export const WORKSPACE = 'w'.repeat(32);
export const SUBSCRIPTION = 't'.repeat(32);
/** Every retry is due this long after its first attempt; the second dispatcher's clock runs this far ahead. */
const RETRY_MS = 3_600_000;
const BATCH = 1_000;
/** Fan-outs under way at once. */
const WINDOW = 256;

export const heapAfterGc = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};
export const mb = (bytes: number): number => round(bytes / 1024 / 1024, 0);

interface TakeOver {
  readonly heapMb: number;
  readonly perS: number;
  readonly seconds: number;
  /** The restart's read of what waits, and its offer to the schedule. */
  readonly restoreMs: number;
}

/** What a run's two dispatchers share. */
export interface Run {
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

/** `work` on a fresh SQLite log, delivery history index and shared schedule (keys of its own in the bench's Redis), all let go after it. */
export const withRun = async <T>(work: (run: Run) => Promise<T>): Promise<T> => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-takeover-'));
  const log = openSqliteLog({ file: path.join(dir, 'events.sqlite'), durability: 'relaxed' });
  const prefix = `bench-${randomId()}:`;
  const index = openRedisDeliveryIndex({ url: URL, keyPrefix: prefix });
  const indexer = createHistoryIndexer(log, index, { retentionMs: 86_400_000, clock: () => Date.now() * 1000 });
  const schedule = createRedisRetrySchedule({ url: URL, leaseMs: 60_000, keyPrefix: prefix });
  try {
    await indexer.start();
    await schedule.ready();
    const directory = await subscriptionsOf(log, WORKSPACE, [SUBSCRIPTION]);
    return await work({ log, indexer, directory, records: recordsForKafka(log, index, () => indexer.pending()), schedule });
  } finally {
    await schedule.close();
    await indexer.stop();
    await index.clear();
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

/** One run on fresh data: the backlog built, then taken over with views of at most `waitingKept`. */
const takeOver = (events: number, waitingKept: number): Promise<TakeOver> =>
  withRun(async (run) => {
    await backlog(run, events);
    const before = heapAfterGc();
    const delivered = { n: 0 };
    const second = dispatcherOf(run, { delivered: true, statusCode: 200, error: null, latencyMs: 1 }, delivered, {
      clock: () => (Date.now() + RETRY_MS + 1_000) * 1000,
      waitingKept,
    });
    const started = performance.now();
    const restoreMs = await restart(run, second);
    second.start();
    let most = 0;
    while (delivered.n < events) {
      await sleep(250);
      most = Math.max(most, heapAfterGc() - before);
    }
    const seconds = (performance.now() - started) / 1000;
    await second.stop();
    return { heapMb: mb(most), perS: round(events / seconds, 0), seconds: round(seconds, 1), restoreMs };
  });

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = long ? 300_000 : 100_000;
  await engine('redis', 'start');
  try {
    const whole = await takeOver(events, Number.POSITIVE_INFINITY);
    console.log(`takeover: ${events} waiting, every one kept (ceiling): restored in ${whole.restoreMs} ms, ${whole.heapMb} MB retained at most, drained at ${whole.perS}/s in ${whole.seconds} s`);
    const bounded = await takeOver(events, WAITING_KEPT);
    console.log(`takeover: ${events} waiting, views of at most ${WAITING_KEPT}: restored in ${bounded.restoreMs} ms, ${bounded.heapMb} MB retained at most, drained at ${bounded.perS}/s in ${bounded.seconds} s`);
    return {
      bench: 'takeover',
      waiting: events,
      heap_mb_kept_whole: whole.heapMb,
      drain_per_s_kept_whole: whole.perS,
      heap_mb: bounded.heapMb,
      drain_per_s: bounded.perS,
      drain_ratio: round(bounded.perS / whole.perS, 2),
      restore_ms: bounded.restoreMs,
    };
  } finally {
    await engine('redis', 'stop');
  }
}
