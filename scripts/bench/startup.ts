// Start-up benchmark: how long the embedded service takes to start and serve its read models over a
// log of real tickets, then over the same log after a long delivery history at its end was deleted
// (what deleting a webhook subscription leaves), then with a delivery history that is kept (a live
// subscription's settled deliveries), started twice: the first start after the history was recorded
// and the next one. Beside them the ceiling: one plain read of the whole log through the port, which
// any start-up that rebuilds from the log must at least do.
// `npm run bench -- startup [--long]`: 1,000 tickets, a deleted tail of 50,000 events and a kept
// history of 200,000 deliveries (5,000, 200,000 and 1,000,000 with --long).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { startService } from '../../src/service.js';
import { recordHistory } from './delivery-records.js';

const ADMIN = 'bench-admin';
const WRITERS = 16;

const config = (dataDir: string) =>
  loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, RATE_LIMIT_PER_KEY: '1000000000', PLANS: 'bench:100000000:true' });

const json = async (url: string, method: string, token: string, body?: unknown) => {
  const response = await fetch(url, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Record<string, unknown>;
};

/** Milliseconds from the call to start until the ticket list answers with every ticket. */
const timeStart = async (dataDir: string, key: string, tickets: number): Promise<number> => {
  const began = performance.now();
  const service = await startService(config(dataDir));
  const listed = await json(`${service.url}/api/v1/tickets?page_size=1`, 'GET', key);
  const took = performance.now() - began;
  await service.close();
  if (listed.total !== tickets) throw new Error(`listed ${String(listed.total)} tickets, expected ${tickets}`);
  return Math.round(took);
};

/** The ceiling: every event of the log read once, in pages, through the port. */
const timeRead = async (file: string): Promise<{ ms: number; events: number }> => {
  const log = openSqliteLog({ file });
  const began = performance.now();
  let events = 0;
  for (let after = 0; ; ) {
    const page = await log.readAll({ after, limit: 1000 });
    if (page.length === 0) break;
    events += page.length;
    after = page.at(-1)?.position ?? after;
  }
  const ms = Math.round(performance.now() - began);
  await log.close();
  return { ms, events };
};

export const run = async ({ long }: { long: boolean }) => {
  const tickets = long ? 5_000 : 1_000;
  const deleted = long ? 200_000 : 50_000;
  const kept = long ? 1_000_000 : 200_000;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-startup-'));
  const file = path.join(dataDir, 'events.sqlite');
  console.log(`load average before: ${loadavg()[0]?.toFixed(2)}`);
  try {
    const service = await startService(config(dataDir));
    const workspace = await json(`${service.url}/admin/v1/workspaces`, 'POST', ADMIN, { name: 'bench', plan: 'bench' });
    const key = String(workspace.api_key);
    let next = 0;
    await Promise.all(
      Array.from({ length: WRITERS }, async () => {
        while (next < tickets) {
          const n = next++;
          await json(`${service.url}/api/v1/tickets`, 'POST', key, { subject: `t${n}`, contact: { email: `c${n % 200}@example.com` }, message: `hello ${n}` });
        }
      }),
    );
    // Created last: no event after it, so the only deliveries it has are the history recorded below.
    const subscription = await json(`${service.url}/api/v1/webhooks`, 'POST', key, { url: 'https://example.com/hook' });
    await service.close();

    const intact = await timeStart(dataDir, key, tickets);
    const read = await timeRead(file);
    console.log(`log of ${read.events} events (${tickets} tickets)`);
    console.log(`  start-up until every ticket is listed  ${String(intact).padStart(6)} ms`);
    console.log(`  ceiling: one read of the whole log     ${String(read.ms).padStart(6)} ms`);

    const log = openSqliteLog({ file });
    const stream = `deliveries-${randomBytes(16).toString('hex')}`;
    for (let done = 0; done < deleted; done += 1000) {
      const batch = Array.from({ length: 1000 }, (_, i) => ({ id: randomBytes(16).toString('hex'), type: 'delivery.attempted', workspaceId: String(workspace.workspace_id), data: { n: done + i } }));
      await log.append(stream, batch, 'any');
    }
    await log.deleteStream(stream);
    await log.close();
    const withDeletedTail = await timeStart(dataDir, key, tickets);
    console.log(`the same log after a tail of ${deleted} events was deleted`);
    console.log(`  start-up until every ticket is listed  ${String(withDeletedTail).padStart(6)} ms`);

    await recordHistory(file, String(workspace.workspace_id), String(subscription.id), kept);
    const historyFirst = await timeStart(dataDir, key, tickets);
    const historyAgain = await timeStart(dataDir, key, tickets);
    console.log(`the same log with a kept history of ${kept} settled deliveries (packed 100 to a log event)`);
    console.log(`  first start after it was recorded      ${String(historyFirst).padStart(6)} ms`);
    console.log(`  the next start                         ${String(historyAgain).padStart(6)} ms`);
    console.log(`load average after: ${loadavg()[0]?.toFixed(2)}`);
    return {
      tickets,
      log_events: read.events,
      deleted_tail_events: deleted,
      kept_history_deliveries: kept,
      startup_ms: intact,
      startup_deleted_tail_ms: withDeletedTail,
      startup_kept_history_first_ms: historyFirst,
      startup_kept_history_again_ms: historyAgain,
      ceiling_read_ms: read.ms,
    };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
};
