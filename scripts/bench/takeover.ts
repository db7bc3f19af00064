// Distributed take-over benchmark: what a dispatcher sharing its retry schedule in Redis holds, and
// how fast it drains, when it takes over a dead receiver's backlog. `npm run bench -- takeover [--long]`.
//
// A private Redis (the bench's own port) holds the schedule and the delivery history index, beside a
// SQLite log (backlog-kit.ts). A first dispatcher fans 100,000 events (--long: 300,000) out to one subscription whose
// receiver refuses them all, and stops once each first attempt is recorded failed. A second one,
// started from the index as a dispatcher role starts, takes every retry over: its clock runs the retry
// delay ahead, so all of them are due at once, as after an outage, and its receiver answers at once
// (in process: the take-over's reads are what is measured, not HTTP). Done twice on fresh data: with
// every waiting delivery kept in its view (the ceiling: the behaviour before views were bounded) and
// as the dispatcher keeps them now (a view of at most WAITING_KEPT). Figures: the heap retained (after
// a full GC, sampled every 250 ms while it drains, the most over the heap before it started) and the
// drain's rate. The index is kept current in this process, on the same event loop (a dispatcher
// role keeps it in a thread of its own): the figures are a floor for the role.
import { setTimeout as sleep } from 'node:timers/promises';
import { WAITING_KEPT } from '../../src/webhooks/dispatch/waiting.js';
import { backlog, dispatcherOf, engine, heapAfterGc, mb, restart, RETRY_MS, withRun } from './backlog-kit.js';
import { round } from './fanout.js';

interface TakeOver {
  readonly heapMb: number;
  readonly perS: number;
  readonly seconds: number;
  /** The restart's read of what waits, and its offer to the schedule. */
  readonly restoreMs: number;
}

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
