// Deactivation benchmark: what it costs a dispatcher to cancel a dead receiver's backlog when the
// subscription is deactivated. That is when backlogs are largest: a subscription is deactivated at its
// 5th failed delivery in a row, each failed once its retry schedule ran out (7 h 42 min by default),
// so by then it owes every event of those hours. `npm run bench -- deactivation [--long]`;
// `BENCH_WAITING` sets the backlog (default 100,000; --long 300,000).
//
// In each mode a dispatcher's first attempts are all refused, their retries due an hour later, then
// it is told of the deactivation and cancels them all. Embedded: the dispatcher of the embedded
// default, its own schedule, the retries waiting in its parking lot (PARKING_LIMITS). Distributed: the
// backlog left by a first dispatcher (backlog-kit.ts), then a second one sharing the retry schedule
// in Redis, started from the delivery history index as a dispatcher role starts, cancels them; the
// index is not kept current meanwhile (a role keeps it in a thread of its own, the bench on this
// event loop). Figures: the time until every delivery is recorded cancelled, its rate against the
// ceiling (the log appending the same cancellation records, a thousand to an append), the heap
// retained meanwhile and the longest the event loop was held (backlog-kit.ts watchLoop): the
// dispatcher sends the other subscriptions' deliveries meanwhile.
import { foldDeliveries, packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { SqliteEventLog } from '../../src/log/sqlite.js';
import type { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { randomId } from '../../src/shared/ids.js';
import { backlog, dispatcherOf, engine, heapAfterGc, REFUSED, restart, SUBSCRIPTION, watchLoop, WORKSPACE, withParkedBacklog, withRun, type Run } from './backlog-kit.js';
import { round } from './fanout.js';

/** Cancellations to an append in the ceiling. */
const CEILING_BATCH = 1_000;

interface Deactivation {
  readonly seconds: number;
  readonly perS: number;
  readonly heapMb: number;
  readonly loopHeldMaxMs: number;
}

/** Tells `dispatcher` of the deactivation of SUBSCRIPTION (every delivery's event before it) and measures it until it is done. */
const measured = async (dispatcher: Dispatcher, position: number, events: number): Promise<Deactivation> => {
  const watch = watchLoop(heapAfterGc());
  const started = performance.now();
  await dispatcher.subscriptionDeactivated(SUBSCRIPTION, position);
  const seconds = (performance.now() - started) / 1000;
  const { heldMs, heapMb } = watch.stop();
  return { seconds: round(seconds, 1), perS: round(events / seconds, 0), heapMb, loopHeldMaxMs: heldMs };
};

const expectCancelled = async (log: SqliteEventLog, events: number): Promise<void> => {
  const left = [...foldDeliveries(await log.readStream(deliveryStream(SUBSCRIPTION))).values()].filter((d) => d.status !== 'cancelled').length;
  if (left !== 0) throw new Error(`${left} of ${events} deliveries not cancelled after the deactivation`);
};

/** The embedded default's dispatcher, its backlog parked. */
const embedded = (events: number): Promise<Deactivation> =>
  withParkedBacklog(events, async ({ log, dispatcher }) => {
    const result = await measured(dispatcher, (await log.headPosition()) + 1, events);
    await expectCancelled(log, events);
    return result;
  });

/** The distributed mode's: a dispatcher started from the index after another built the backlog. */
const distributed = (events: number): Promise<Deactivation> =>
  withRun(async (run: Run) => {
    await backlog(run, events);
    const second = dispatcherOf(run, REFUSED, { n: 0 });
    await restart(run, second);
    second.start();
    // A role keeps the index in a thread of its own: its applies of the cancellations would hold this loop (up to 170 ms each here).
    await run.indexer.runner.stop();
    const result = await measured(second, (await run.log.headPosition()) + 1, events);
    await second.stop();
    await expectCancelled(run.log, events);
    return result;
  });

/** The log appending `events` cancellation records, CEILING_BATCH to an append, one append at a time: per second. */
const ceiling = (events: number): Promise<number> =>
  withRun(async ({ log }) => {
    const stream = `deliveries-${randomId()}`;
    const started = performance.now();
    for (let n = 0; n < events; n += CEILING_BATCH) {
      const steps = Array.from({ length: Math.min(CEILING_BATCH, events - n) }, () => ({
        type: 'delivery.cancelled',
        data: { delivery_id: randomId(), round: 1, reason: 'subscription_inactive', cancelled_at: Date.now() * 1000 },
      }));
      const packed = packSteps(steps);
      await log.append(stream, [{ id: randomId(), type: packed.type, workspaceId: WORKSPACE, data: packed.data }], 'any');
    }
    return round(events / ((performance.now() - started) / 1000), 0);
  });

const line = (mode: string, events: number, result: Deactivation, ceilingPerS: number): string =>
  `deactivation (${mode}): ${events} waiting cancelled in ${result.seconds} s (${result.perS}/s, ${round(result.perS / ceilingPerS, 2)} of the ceiling), ${result.heapMb} MB retained at most, the event loop held ${result.loopHeldMaxMs} ms at most`;

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_WAITING'] ?? (long ? 300_000 : 100_000));
  await engine('redis', 'start');
  try {
    const ceilingPerS = await ceiling(events);
    console.log(`deactivation: ceiling: the log appends ${events} cancellation records at ${ceilingPerS}/s`);
    const alone = await embedded(events);
    console.log(line('embedded', events, alone, ceilingPerS));
    const shared = await distributed(events);
    console.log(line('distributed', events, shared, ceilingPerS));
    return {
      bench: 'deactivation',
      waiting: events,
      ceiling_per_s: ceilingPerS,
      embedded_cancelled_per_s: alone.perS,
      embedded_ratio: round(alone.perS / ceilingPerS, 2),
      embedded_heap_mb: alone.heapMb,
      embedded_loop_held_max_ms: alone.loopHeldMaxMs,
      distributed_cancelled_per_s: shared.perS,
      distributed_ratio: round(shared.perS / ceilingPerS, 2),
      distributed_heap_mb: shared.heapMb,
      distributed_loop_held_max_ms: shared.loopHeldMaxMs,
    };
  } finally {
    await engine('redis', 'stop');
  }
}
