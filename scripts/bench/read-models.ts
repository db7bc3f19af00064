// Read-model start-up benchmark: the embedded service over a log of N tickets (4 events each: the
// contact registered, the ticket opened, two messages), appended straight to the log. Each start runs
// in a fresh process, which reports how long it took until the ticket list answers with every ticket,
// and its RSS and heap then. Two starts in a row: with the read models in memory both rebuild from the
// whole log; with DATA_DIR/read-models.sqlite the first builds the file, the second resumes from it.
// `npm run bench -- read-models [--long]`: 12,500 tickets (50,000 events); 50,000 with --long;
// BENCH_TICKETS overrides (250000: a log of 1,000,000 events).
// `--code DIR` runs the starts with the service of another checkout (e.g. a worktree of an older
// commit, to compare): DIR/scripts/bench/read-models.ts must be this file.
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config/config.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { startService } from '../../src/service.js';

const ADMIN = 'bench-admin';
const CONCURRENT_APPENDS = 64;

const config = (dataDir: string) => loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, RATE_LIMIT_PER_KEY: '1000000000', PLANS: 'bench:100000000:true' });

const hex = () => randomBytes(16).toString('hex');

/** One start in this process: the figures as one JSON line. */
const child = async (dataDir: string, key: string, tickets: number) => {
  const began = performance.now();
  const service = await startService(config(dataDir));
  const response = await fetch(`${service.url}/api/v1/tickets?page_size=1`, { headers: { authorization: `Bearer ${key}` } });
  const listed = (await response.json()) as { total?: number };
  const ms = Math.round(performance.now() - began);
  const rssMb = Math.round(process.memoryUsage().rss / 2 ** 20);
  (globalThis as { gc?: () => void }).gc?.();
  const heapMb = Math.round(process.memoryUsage().heapUsed / 2 ** 20);
  await service.close();
  if (listed.total !== tickets) throw new Error(`listed ${String(listed.total)} tickets, expected ${tickets}`);
  console.log(JSON.stringify({ ms, rssMb, heapMb }));
};

/** A workspace made through the API, then `tickets` tickets appended to its log directly. */
const prepare = async (dataDir: string, tickets: number): Promise<string> => {
  const service = await startService(config(dataDir));
  const response = await fetch(`${service.url}/admin/v1/workspaces`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bench', plan: 'bench' }) });
  const workspace = (await response.json()) as { workspace_id: string; api_key: string };
  await service.close();
  const workspaceId = workspace.workspace_id;
  const log = openSqliteLog({ file: path.join(dataDir, 'events.sqlite') });
  const at = new Date().toISOString().replace('Z', '000+00:00');
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENT_APPENDS }, async () => {
      while (next < tickets) {
        const n = next++;
        const [contactId, ticketId] = [hex(), hex()];
        await log.append(`contact-${contactId}`, [{ id: hex(), type: 'contact.registered', workspaceId, data: { contact_id: contactId, workspace_id: workspaceId, internal_id: null, email: `c${n}@example.com`, full_name: `Contact ${n}`, phone: null, telegram_id: null, created_at: at } }], 'no_stream');
        const message = (content: string, sender: 'contact' | 'operator') => {
          const id = hex();
          return { id: hex(), type: 'message.created', workspaceId, data: { id, message_id: id, ticket_id: ticketId, sender_type: sender, sender_id: contactId, sender_name: null, content, is_internal: false, media: [], created_at: at } };
        };
        await log.append(
          `ticket-${ticketId}`,
          [
            { id: hex(), type: 'ticket.opened', workspaceId, data: { ticket_id: ticketId, status: 'new', priority: 'normal', contact_id: contactId, subject: `Ticket ${n}: the printer does not print`, workspace_id: workspaceId, created_at: at } },
            message(`Hello, ticket ${n} here. ${'Some words of a first message. '.repeat(4)}`, 'contact'),
            message(`Thanks for writing to us about ${n}; we are looking into it.`, 'operator'),
          ],
          'no_stream',
        );
      }
    }),
  );
  await log.close();
  return workspace.api_key;
};

const start = (code: string, dataDir: string, key: string, tickets: number): { ms: number; rssMb: number; heapMb: number } => {
  const script = path.join(code, 'scripts/bench/read-models.ts');
  const run = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', script, '--child', dataDir, key, String(tickets)], { cwd: code, encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`start failed: ${run.stderr}`);
  return JSON.parse(run.stdout.trim().split('\n').at(-1) as string) as { ms: number; rssMb: number; heapMb: number };
};

export const run = async ({ long, code }: { long: boolean; code?: string }) => {
  const tickets = Number(process.env['BENCH_TICKETS'] ?? (long ? 50_000 : 12_500));
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-read-models-'));
  const here = code ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  console.log(`load average before: ${loadavg()[0]?.toFixed(2)}; service code: ${here}`);
  try {
    const key = await prepare(dataDir, tickets);
    const size = (name: string) => {
      try {
        return Math.round(statSync(path.join(dataDir, name)).size / 2 ** 20);
      } catch {
        return 0;
      }
    };
    console.log(`log of ${tickets * 4} ticket events (${tickets} tickets), ${size('events.sqlite')} MB`);
    const first = start(here, dataDir, key, tickets);
    console.log(`  first start  ${String(first.ms).padStart(6)} ms, RSS ${first.rssMb} MB, heap after gc ${first.heapMb} MB`);
    const second = start(here, dataDir, key, tickets);
    console.log(`  second start ${String(second.ms).padStart(6)} ms, RSS ${second.rssMb} MB, heap after gc ${second.heapMb} MB`);
    console.log(`  read-models.sqlite: ${size('read-models.sqlite')} MB (+ WAL ${size('read-models.sqlite-wal')} MB)`);
    console.log(`load average after: ${loadavg()[0]?.toFixed(2)}`);
    return { tickets, events: tickets * 4, first_ms: first.ms, first_rss_mb: first.rssMb, second_ms: second.ms, second_rss_mb: second.rssMb, second_heap_mb: second.heapMb };
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
};

const args = process.argv.slice(2);
if (args[0] === '--child') {
  await child(args[1] as string, args[2] as string, Number(args[3]));
  process.exit(0);
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const codeAt = args.indexOf('--code');
  console.log(JSON.stringify(await run({ long: args.includes('--long'), ...(codeAt >= 0 ? { code: path.resolve(args[codeAt + 1] as string) } : {}) })));
  process.exit(0);
}
