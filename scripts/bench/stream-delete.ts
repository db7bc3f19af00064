// Stream-delete benchmark: what deleting a long stream (a deleted webhook's delivery history) costs the
// log's other writers. `npm run bench -- stream-delete [--long]`; `BENCH_EVENTS` sets the stream's
// length (default 300,000; --long 1,000,000). This thread appends one event at a time to other
// streams, as the API's requests do, and times each append, while the stream is deleted: in a thread
// of its own on its own connection, as the dispatcher thread does, then (on a copy) on the appends'
// own connection, as the embedded API's main thread does too. Each beside its ceiling: the same rows
// of a copy deleted in one statement (what deleteStream was), the least the deletion can take in
// all and what every other writer waited for meanwhile.
import { randomUUID } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import type { NewEvent } from '../../src/log/event-log.js';
import { openLogDatabase } from '../../src/log/sqlite-open.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { eventId } from '../../src/shared/ids.js';
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
  id: eventId(),
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

/** Appends one event a millisecond to fresh streams of the log while `work` runs (given the appends' log): how long each waited from when it was due, and the result of `work`. */
const appendsBeside = async <T>(file: string, work: (writer: SqliteEventLog) => Promise<T>) => {
  const writer = openSqliteLog({ file, shared: true });
  const waits: number[] = [];
  let failures = 0;
  let working = true;
  const writing = (async () => {
    // From when the append was due: a thread held meanwhile delays its start, as it delays a request's.
    let due = performance.now();
    for (;;) {
      try {
        await writer.append(`ticket-${randomUUID()}`, [{ id: eventId(), type: 'ticket.created', workspaceId: 'ws_bench', data: { subject: 'x' } }], 'no_stream');
        waits.push(performance.now() - due);
      } catch {
        failures += 1;
      }
      // The append due after the last sleep is made even when `work` ended meanwhile.
      if (!working) return;
      due = performance.now() + 1;
      await sleep(1);
    }
  })();
  let result: T;
  try {
    result = await work(writer);
  } finally {
    // The append under way counts too: one held by this thread ends after `work` does.
    working = false;
    await writing;
    await writer.close();
  }
  return { result, waits: quantiles(waits), failures };
};

/** Throws unless the stream is gone from the log in `file`. */
const checkGone = async (file: string, how: string): Promise<void> => {
  const log = openSqliteLog({ file, shared: true });
  const left = (await log.readStream(STREAM)).length;
  await log.close();
  if (left !== 0) throw new Error(`${left} events of the stream left after its deletion (${how})`);
};

/** Deletes the stream by `mode` in a thread of its own, as the dispatcher thread does: ms, once none of it is left. */
const deleteInThread = async (file: string, mode: DeleterData['mode']): Promise<number> => {
  const worker = startWorker(new URL('./stream-delete-worker.ts', import.meta.url), { workerData: { file, stream: STREAM, mode } satisfies DeleterData, name: 'bench-deleter' });
  try {
    const ms = await new Promise<number>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await checkGone(file, `${mode}, in a thread`);
    return round(ms, 0);
  } finally {
    await worker.terminate();
  }
};

/** One DELETE statement on this thread, as the embedded API's connection deleted a history: ms. */
const deleteByStatementHere = async (file: string): Promise<number> => {
  // A turn first, so that an append of the phase is waiting when the statement holds the thread.
  await sleep(50);
  const db = openLogDatabase(file, { shared: true, busyTimeoutMs: 5000 });
  const started = performance.now();
  db.prepare('DELETE FROM events WHERE stream = ?').run(STREAM);
  const ms = performance.now() - started;
  db.close();
  await checkGone(file, 'statement, on this thread');
  return round(ms, 0);
};

/** deleteStream on the appends' own connection, as the embedded API's main thread deletes a history. */
const deleteOnConnection = async (file: string, log: SqliteEventLog): Promise<number> => {
  await sleep(50);
  const started = performance.now();
  await log.deleteStream(STREAM);
  const ms = performance.now() - started;
  await checkGone(file, 'deleteStream, on this thread');
  return round(ms, 0);
};

type Phase = Awaited<ReturnType<typeof appendsBeside<number>>>;
const told = (what: string, events: number, phase: Phase): string =>
  `stream-delete: ${what}: ${events} events deleted in ${phase.result} ms; an append beside it waited up to ${phase.waits.max} ms (p99 ${phase.waits.p99}, ${phase.waits.n} appends), ${phase.failures} failed`;

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const events = Number(process.env['BENCH_EVENTS'] ?? (long ? 1_000_000 : 300_000));
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-stream-delete-'));
  try {
    const file = path.join(dir, 'log.sqlite');
    await fill(file, events);
    const copy = (name: string): string => {
      const to = path.join(dir, name);
      copyFileSync(file, to);
      return to;
    };
    const [threadCeilingFile, hereCeilingFile, hereFile] = [copy('thread-ceiling.sqlite'), copy('here-ceiling.sqlite'), copy('here.sqlite')];
    const quiet = await appendsBeside(file, () => sleep(QUIET_MS));
    console.log(`stream-delete: appends to a quiet log waited up to ${quiet.waits.max} ms (p99 ${quiet.waits.p99}, ${quiet.waits.n} appends)`);
    const threadCeiling = await appendsBeside(threadCeilingFile, () => deleteInThread(threadCeilingFile, 'statement'));
    console.log(told('ceiling, one statement in another thread', events, threadCeiling));
    const thread = await appendsBeside(file, () => deleteInThread(file, 'log'));
    console.log(told('deleteStream in another thread', events, thread));
    const hereCeiling = await appendsBeside(hereCeilingFile, () => deleteByStatementHere(hereCeilingFile));
    console.log(told("ceiling, one statement on the appends' thread", events, hereCeiling));
    const here = await appendsBeside(hereFile, (writer) => deleteOnConnection(hereFile, writer));
    console.log(told("deleteStream on the appends' connection", events, here));
    return {
      bench: 'stream-delete',
      events,
      quiet_append_wait_p99_ms: quiet.waits.p99,
      quiet_append_wait_max_ms: quiet.waits.max,
      ceiling_ms: threadCeiling.result,
      ceiling_append_wait_max_ms: threadCeiling.waits.max,
      ceiling_append_failures: threadCeiling.failures,
      delete_ms: thread.result,
      append_wait_p99_ms: thread.waits.p99,
      append_wait_max_ms: thread.waits.max,
      append_failures: thread.failures,
      same_thread_ceiling_ms: hereCeiling.result,
      same_thread_ceiling_append_wait_max_ms: hereCeiling.waits.max,
      same_thread_delete_ms: here.result,
      same_thread_append_wait_p99_ms: here.waits.p99,
      same_thread_append_wait_max_ms: here.waits.max,
      same_thread_append_failures: here.failures,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
