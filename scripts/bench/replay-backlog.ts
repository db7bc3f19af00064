// Replay on a backlog benchmark: a replay started while its subscription owes a dead receiver's
// backlog, as when a receiver comes back and its owner replays what it missed while the retries
// still wait. A replay paces itself by its own deliveries not yet attempted, asked every 20 ms; it
// found them among the subscription's every waiting delivery, kept in memory while it ran.
// `npm run bench -- replay-backlog [--long]`: 100,000 waiting (--long: 300,000; `BENCH_WAITING` sets
// it), left by a first dispatcher (backlog-kit.ts); a second one, started from the delivery history
// index as a dispatcher role starts, drives a replay of 2,000 new events, its receiver answering at
// once, in process. Figures: the replay's rate until every replayed delivery is sent, the heap
// retained meanwhile and the longest the event loop was held (watchLoop), beside the same replay on a
// subscription with nothing waiting (the ceiling). The index is kept current on this event loop (a
// role keeps it in a thread of its own): the figures are a floor for the role.
import { setTimeout as sleep } from 'node:timers/promises';
import { foldReplay, replayAggregate, replayEventId, replayStream, type Replay } from '../../src/domain/replay/replay.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { driveReplay } from '../../src/webhooks/dispatch/replay-driver.js';
import { backlog, dispatcherOf, engine, heapAfterGc, restart, SUBSCRIPTION, watchLoop, WORKSPACE, withRun, type Run } from './backlog-kit.js';
import { round } from './fanout.js';

const REPLAYED = 2_000;

interface ReplayRun {
  readonly seconds: number;
  readonly perS: number;
  readonly heapMb: number;
  readonly loopHeldMaxMs: number;
}

/** Appends REPLAYED public events and requests a replay of them (and of nothing before them) to SUBSCRIPTION. */
const requested = async ({ log }: Run): Promise<Replay> => {
  const events: NewEvent[] = Array.from({ length: REPLAYED }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId: WORKSPACE, data: { ticket_id: randomId() } }));
  const { records } = await log.append(`bench-${randomId()}`, events, 'any');
  const replayId = randomId();
  const request = { kind: 'request', replayId, at: Date.now() * 1000, subscriptionId: SUBSCRIPTION, since: records[0]?.offset as number, until: null, throughPosition: await log.headPosition(), types: [], onlyFailed: false } as const;
  const decided = replayAggregate.decide(request, replayAggregate.initial);
  if (decided._tag === 'Left') throw new Error(decided.left.message);
  await log.append(replayStream(replayId), decided.right.map((step) => ({ id: replayEventId(step), type: step.type, workspaceId: WORKSPACE, data: step.data })), 'any');
  return foldReplay(await log.readStream(replayStream(replayId)), replayId) as Replay;
};

const replayOn = (waiting: number): Promise<ReplayRun> =>
  withRun(async (run) => {
    if (waiting > 0) await backlog(run, waiting);
    const sent = { n: 0 };
    const dispatcher = dispatcherOf(run, { delivered: true, statusCode: 200, error: null, latencyMs: 1 }, sent);
    await restart(run, dispatcher);
    dispatcher.start();
    const replay = await requested(run);
    const watch = watchLoop(heapAfterGc());
    const started = performance.now();
    const outcome = await driveReplay({ log: run.log, subscriptions: run.directory, dispatcher, clock: () => Date.now() * 1000, keep: async () => true, stopped: () => false }, WORKSPACE, replay);
    if (outcome !== 'finished') throw new Error(`the replay ended ${outcome}`);
    while (sent.n < REPLAYED) await sleep(10);
    const seconds = (performance.now() - started) / 1000;
    const { heldMs, heapMb } = watch.stop();
    await dispatcher.stop();
    if (sent.n !== REPLAYED) throw new Error(`${sent.n} requests for ${REPLAYED} replayed deliveries`);
    return { seconds: round(seconds, 1), perS: round(REPLAYED / seconds, 0), heapMb, loopHeldMaxMs: heldMs };
  });

const line = (what: string, result: ReplayRun): string =>
  `replay-backlog: ${REPLAYED} replayed ${what}: in ${result.seconds} s (${result.perS}/s), ${result.heapMb} MB retained at most, the event loop held ${result.loopHeldMaxMs} ms at most`;

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const waiting = Number(process.env['BENCH_WAITING'] ?? (long ? 300_000 : 100_000));
  await engine('redis', 'start');
  try {
    const alone = await replayOn(0);
    console.log(line('with nothing waiting (ceiling)', alone));
    const behind = await replayOn(waiting);
    console.log(line(`with ${waiting} waiting`, behind));
    return {
      bench: 'replay-backlog',
      waiting,
      replayed: REPLAYED,
      ceiling_per_s: alone.perS,
      ceiling_heap_mb: alone.heapMb,
      ceiling_loop_held_max_ms: alone.loopHeldMaxMs,
      replayed_per_s: behind.perS,
      ratio: round(behind.perS / alone.perS, 2),
      heap_mb: behind.heapMb,
      loop_held_max_ms: behind.loopHeldMaxMs,
    };
  } finally {
    await engine('redis', 'stop');
  }
}
