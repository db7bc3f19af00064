// Stream-delete benchmark: what deleting a long stream (a deleted webhook's delivery history) costs the
// log's other writers. `npm run bench -- stream-delete [--long]`; `BENCH_EVENTS` sets the stream's
// length (default 300,000; --long 1,000,000). The deletion runs in a thread of its own on its own
// connection, as the dispatcher thread's does, while this thread appends one event at a time to other
// streams, as the API's requests do, and times each append. Ceiling: the same rows of a copy of the
// log deleted in one statement (what deleteStream was): the least the deletion can take in all, and
// what every other writer waited for meanwhile.
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { startWorker } from '../../src/shared/worker.js';
import { round, sleep } from './fanout.js';
import { quantiles } from './quantiles.js';
import type { DeleterData } from './stream-delete-worker.js';

const STREAM = 'deliveries-wh_bench';
const FILL_BATCH = 5000;
/** How long appends are timed on the log alone, for comparison. */
const QUIET_MS = 3000;

/** A delivery's first attempt, failed, as the dispatcher records it (its steps packed in one event). */
const record = (n: number): NewEvent => ({
  id: randomUUID(),
  workspaceId: 'ws_bench',
  ...packSteps([
    { type: 'delivery.scheduled', data: { delivery_id: `dlv_${n}`, event_id: `evt_${n}`, event_type: 'ticket.created', event_position: n, subscription_id: 'wh_bench', round: 0, scheduled_at: 1_764_000_000_000 + n } },
    { type: 'delivery.attempted', data: { delivery_id: `dlv_${n}`, round: 0, attempt: 1, status_code: 503, error: null, latency_ms: 12, attempted_at: 1_764_000_000_100 + n, next_attempt_at: 1_764_000_005_100 + n } },
  ]),
});

const fill = async (file: string, events: number): Promise<void> => {
  const log = openSqliteLog({ file, durability: 'relaxed' });
  for (let n = 0; n < events; n += FILL_BATCH) await log.append(STREAM, Array.from({ length: Math.min(FILL_BATCH, events - n) }, (_, i) => record(n + i)), 'any');
  await log.close();
};

/** Appends one event a millisecond to fresh streams of the log while `work` runs: the waits of those appends, and the result of `work`. */
const appendsBeside = async <T>(file: string, work: () => Promise<T>) => {
  const writer = openSqliteLog({ file, shared: true });
  const waits: number[] = [];
  let failures = 0;
  let working = true;
  const writing = (async () => {
    while (working) {
      const started = performance.now();
      try {
        await writer.append(`ticket-${randomUUID()}`, [{ id: randomUUID(), type: 'ticket.created', workspaceId: 'ws_bench', data: { subject: 'x' } }], 'no_stream');
        waits.push(performance.now() - started);
      } catch {
        failures += 1;
      }
      await sleep(1);
    }
  })();
  try {
    return { result: await work(), waits: quantiles(waits), failures };
  } finally {
    working = false;
    await writing;
    await writer.close();
  }
};

/** Deletes the stream by `mode` in a thread of its own, as the dispatcher thread does: ms, once none of it is left. */
const deleteInThread = async (file: string, mode: DeleterData['mode']): Promise<number> => {
  const worker = startWorker(new URL('./stream-delete-worker.ts', import.meta.url), { workerData: { file, stream: STREAM, mode } satisfies DeleterData, name: 'bench-deleter' });
  try {
    const ms = await new Promise<number>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    const log = openSqliteLog({ file, shared: true });
    const left = (await log.readStream(STREAM)).length;
    await log.close();
    if (left !== 0) throw new Error(`${left} events of the stream left after its deletion (${mode})`);
    return round(ms, 0);
  } finally {
    await worker.terminate();
  }
};

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_EVENTS'] ?? (long ? 1_000_000 : 300_000));
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-stream-delete-'));
  try {
    const file = path.join(dir, 'log.sqlite');
    await fill(file, events);
    copyFileSync(file, path.join(dir, 'ceiling.sqlite'));
    const quiet = await appendsBeside(file, () => sleep(QUIET_MS));
    console.log(`stream-delete: appends to a quiet log waited up to ${quiet.waits.max} ms (p99 ${quiet.waits.p99}, ${quiet.waits.n} appends)`);
    const ceiling = await appendsBeside(path.join(dir, 'ceiling.sqlite'), () => deleteInThread(path.join(dir, 'ceiling.sqlite'), 'statement'));
    console.log(`stream-delete: ceiling: ${events} events deleted in one statement in ${ceiling.result} ms; an append beside it waited up to ${ceiling.waits.max} ms (p99 ${ceiling.waits.p99}), ${ceiling.failures} failed`);
    const batched = await appendsBeside(file, () => deleteInThread(file, 'log'));
    console.log(`stream-delete: deleteStream: ${events} events in ${batched.result} ms (${round(batched.result / Math.max(1, ceiling.result), 2)} of the ceiling's time); an append beside it waited up to ${batched.waits.max} ms (p99 ${batched.waits.p99}, ${batched.waits.n} appends), ${batched.failures} failed`);
    return {
      bench: 'stream-delete',
      events,
      quiet_append_wait_p99_ms: quiet.waits.p99,
      quiet_append_wait_max_ms: quiet.waits.max,
      ceiling_ms: ceiling.result,
      ceiling_append_wait_max_ms: ceiling.waits.max,
      ceiling_append_failures: ceiling.failures,
      delete_ms: batched.result,
      append_wait_p99_ms: batched.waits.p99,
      append_wait_max_ms: batched.waits.max,
      append_failures: batched.failures,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
