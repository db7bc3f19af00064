// History-forget benchmark: what forgetting a deleted webhook's delivery history costs the thread that
// keeps the embedded mode's delivery history index (projections/deliveries-index-sqlite.ts), which
// indexes every other subscription's deliveries meanwhile. `npm run bench -- history-forget [--long]`;
// `BENCH_DELIVERIES` sets the index's rows (default 300,000; --long 1,000,000), nine in ten of the
// forgotten subscription. Figures: how long the forget took and the longest the thread was held
// meanwhile; the ceiling: the same rows of a copy deleted in one statement (what forget was), the
// least it can take in all and how long it held the thread.
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import { round } from './fanout.js';

const FORGOTTEN = 'wh_forgotten';

/** `rows` delivered deliveries in the index's file, as its writer would have left them. */
const fill = async (file: string, rows: number): Promise<void> => {
  await openSqliteDeliveryIndex({ file }).close();
  const db = new Database(file);
  const insert = db.prepare('INSERT INTO deliveries (id, sub, workspace, status, event_type, event_position, created_at, replay, attempted, json) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, 1, ?)');
  db.transaction(() => {
    for (let i = 0; i < rows; i++) {
      const sub = i % 10 === 0 ? 'wh_other' : FORGOTTEN;
      // As delivery ids are: the event's milliseconds, then a hash (src/domain/delivery/ids.ts).
      const id = `${(1_764_000_000_000 + i).toString(16).padStart(12, '0')}${randomBytes(10).toString('hex')}`;
      const json = JSON.stringify({ id, subscriptionId: sub, eventType: 'ticket.created', status: 'delivered', attempt: 1, history: [{ attempt: 1, statusCode: 200, error: null, latencyMs: 12 }] });
      insert.run(id, sub, 'ws_bench', 'delivered', 'ticket.created', i, 1_764_000_000_000_000 + i * 1_000, json);
    }
  })();
  db.close();
};

/** Runs `work` and the longest this thread went without a 1 ms timer meanwhile. */
const holding = async (work: () => Promise<void> | void): Promise<{ ms: number; heldMs: number }> => {
  let last = performance.now();
  let heldMs = 0;
  const timer = setInterval(() => {
    heldMs = Math.max(heldMs, performance.now() - last);
    last = performance.now();
  }, 1);
  const started = performance.now();
  await work();
  const ms = performance.now() - started;
  // The last gap ends with the timer that runs after `work`.
  await new Promise((resolve) => setTimeout(resolve, 2));
  clearInterval(timer);
  return { ms: round(ms, 0), heldMs: round(heldMs, 0) };
};

const left = (file: string): number => {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT count(*) FROM deliveries WHERE sub = ?').pluck().get(FORGOTTEN) as number;
  } finally {
    db.close();
  }
};

export async function run({ long }: { long: boolean }): Promise<Record<string, number | string>> {
  const rows = Number(process.env['BENCH_DELIVERIES'] ?? (long ? 1_000_000 : 300_000));
  const forgotten = rows - Math.ceil(rows / 10);
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-bench-history-forget-'));
  try {
    const file = path.join(dir, 'delivery-history.sqlite');
    await fill(file, rows);
    const copy = path.join(dir, 'ceiling.sqlite');
    copyFileSync(file, copy);
    const db = new Database(copy);
    const ceiling = await holding(() => void db.prepare('DELETE FROM deliveries WHERE sub = ?').run(FORGOTTEN));
    db.close();
    if (left(copy) !== 0) throw new Error('the ceiling left rows behind');
    console.log(`history-forget: ceiling: ${forgotten} rows deleted in one statement in ${ceiling.ms} ms, the thread held ${ceiling.heldMs} ms`);
    const index = openSqliteDeliveryIndex({ file });
    const forget = await holding(() => index.forget(FORGOTTEN));
    await index.close();
    if (left(file) !== 0) throw new Error(`${left(file)} rows of the forgotten subscription left`);
    console.log(`history-forget: forget: ${forgotten} rows in ${forget.ms} ms (${round(forget.ms / Math.max(1, ceiling.ms), 2)} of the ceiling's time), the thread held ${forget.heldMs} ms at most`);
    return { bench: 'history-forget', rows, forgotten, ceiling_ms: ceiling.ms, ceiling_loop_held_ms: ceiling.heldMs, forget_ms: forget.ms, loop_held_max_ms: forget.heldMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
