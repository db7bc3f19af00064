// Deletion benchmark: what a DELETE of a webhook whose receiver is down costs the embedded default's
// dispatcher, whose backlog waits in its parking lot: the lot's rows and the delivery history go with
// it. `npm run bench -- deletion [--long]`; `BENCH_WAITING` sets the backlog (default 100,000; --long
// 300,000), built as in the deactivation bench (backlog-kit.ts withParkedBacklog). Figures: the time
// until the dispatcher has forgotten the subscription, the longest its event loop was held meanwhile
// (it sends the other subscriptions' deliveries) and how long the log's delete of the delivery
// stream took (other writers of the log wait for it); the ceiling: the same number of parked rows
// dropped from a lot in one statement, which is the least the drop can take in all (and what it held
// the loop for when it was one statement).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Delivery } from '../../src/domain/delivery/delivery.js';
import { openParkingLot } from '../../src/webhooks/dispatch/parking.js';
import { heapAfterGc, SUBSCRIPTION, watchLoop, withParkedBacklog } from './backlog-kit.js';
import { round } from './fanout.js';

/** Parked rows put in the ceiling's lot per call. */
const PARK_BATCH = 10_000;

/** `events` parked retries in a fresh lot, as a dead receiver's look, dropped in one statement: ms. */
const ceiling = (events: number, sample: Delivery): number => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-deletion-'));
  const lot = openParkingLot(path.join(dir, 'parked.sqlite'));
  try {
    for (let n = 0; n < events; n += PARK_BATCH) {
      lot.park(Array.from({ length: Math.min(PARK_BATCH, events - n) }, (_, i) => ({ delivery: { ...sample, id: `d${n + i}` }, dueAt: sample.nextAttemptAt as number, retry: true })));
    }
    // Parks are written at the end of the turn, or before any read: now, not in the timed drop.
    lot.earliestDue();
    const started = performance.now();
    lot.drop(SUBSCRIPTION, Number.MAX_SAFE_INTEGER);
    const ms = performance.now() - started;
    if (lot.size() !== 0) throw new Error(`${lot.size()} of ${events} left`);
    return round(ms, 0);
  } finally {
    lot.close();
    rmSync(dir, { recursive: true, force: true });
  }
};

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_WAITING'] ?? (long ? 300_000 : 100_000));
  return withParkedBacklog(events, async ({ log, lot, dispatcher }) => {
    const [sample] = lot.takeAny(SUBSCRIPTION, 1);
    if (sample === undefined) throw new Error('nothing parked');
    lot.park([sample]);
    const ceilingMs = ceiling(events, sample.delivery);
    console.log(`deletion: ceiling: ${events} parked rows dropped in one statement in ${ceilingMs} ms`);
    let logDeleteMs = 0;
    const deleteStream = log.deleteStream.bind(log);
    log.deleteStream = async (stream) => {
      const started = performance.now();
      await deleteStream(stream);
      logDeleteMs += performance.now() - started;
    };
    const watch = watchLoop(heapAfterGc());
    const started = performance.now();
    await dispatcher.subscriptionDeleted(SUBSCRIPTION);
    const ms = round(performance.now() - started, 0);
    const { heldMs } = watch.stop();
    if (lot.size() !== 0) throw new Error(`${lot.size()} parked rows left after the deletion`);
    console.log(`deletion: ${events} waiting forgotten in ${ms} ms (${round(ms / Math.max(1, ceilingMs), 2)} of the ceiling's time), the event loop held ${heldMs} ms at most, the log's delete of the history ${round(logDeleteMs, 0)} ms`);
    return { bench: 'deletion', waiting: events, ceiling_ms: ceilingMs, deletion_ms: ms, loop_held_max_ms: heldMs, log_delete_ms: round(logDeleteMs, 0) };
  });
}
