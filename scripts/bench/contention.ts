// One busy ticket: 64 writers post messages to the same ticket at once (a chat where a bot, operators
// and an integration all write). Counts every answer by status and the messages/s that got a 201,
// beside the ceiling: the same writers, each on a ticket of its own (no contention at all).
// `npm run bench -- contention [--long]`: 20 messages per writer (100 with --long).
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import * as path from 'node:path';
import { loadConfig } from '../../src/config/config.js';
import { startService } from '../../src/service.js';

const ADMIN = 'bench-admin';
const WRITERS = 64;

const post = async (url: string, token: string, body: unknown) => {
  const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
};

interface Phase {
  readonly messagesPerS: number;
  readonly statuses: Record<string, number>;
}

/** Every writer posts `each` messages, one after another, to the ticket `ticketOf(writer)` gives. */
const phase = async (label: string, base: string, key: string, tickets: readonly string[], each: number): Promise<Phase> => {
  const statuses: Record<string, number> = {};
  const started = performance.now();
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      const ticket = tickets[writer % tickets.length] as string;
      for (let i = 0; i < each; i++) {
        const { status } = await post(`${base}/api/v1/tickets/${ticket}/messages`, key, { content: `writer ${writer} message ${i}` });
        statuses[status] = (statuses[status] ?? 0) + 1;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const messagesPerS = Math.round((statuses['201'] ?? 0) / seconds);
  console.log(`${label.padEnd(40)} ${String(messagesPerS).padStart(6)} messages/s   answers ${JSON.stringify(statuses)}`);
  return { messagesPerS, statuses };
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const each = opts.long ? 100 : 20;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-contention-'));
  const service = await startService(
    loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, RATE_LIMIT_PER_KEY: '1000000000', RATE_LIMIT_PER_IP: '1000000000', PLANS: 'bench:100000000:true' }),
  );
  try {
    console.log(`contention bench: ${WRITERS} writers × ${each} messages, load average ${(loadavg()[0] ?? 0).toFixed(2)}`);
    const key = String((await post(`${service.url}/admin/v1/workspaces`, ADMIN, { name: 'bench' })).body['api_key']);
    const open = async () => String((await post(`${service.url}/api/v1/tickets`, key, { contact: { email: `c${Math.random()}@example.com` }, message: 'hello' })).body['id']);
    const busy = await phase('one ticket, 64 writers', service.url, key, [await open()], each);
    const spread = await phase('64 tickets, one writer each (ceiling)', service.url, key, await Promise.all(Array.from({ length: WRITERS }, open)), each);
    const failed = Object.entries(busy.statuses).filter(([status]) => status !== '201').reduce((n, [, count]) => n + count, 0);
    return {
      bench: 'contention',
      writers: WRITERS,
      one_ticket_messages_per_s: busy.messagesPerS,
      one_ticket_not_201: failed,
      ceiling_messages_per_s: spread.messagesPerS,
      load: Number((loadavg()[0] ?? 0).toFixed(2)),
    };
  } finally {
    await service.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
