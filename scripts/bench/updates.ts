// Updates benchmark: the real service holding 1,000 concurrent idle long polls (CPU while idle;
// latency from append acknowledgement to the poller having the event), then export and projection
// rebuild throughput over a generated log. `npm run bench -- updates [--long]`, about a minute.
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Agent, request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { TICKET_OPENED } from '../../src/domain/ticket/state.js';
import type { EventLog, NewEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import { startService } from '../../src/service.js';
import type { FeedItem } from '../../src/updates/feed-item.js';
import type { MemoryNotifier } from '../../src/updates/memory.js';
import { logPages, openExistingLog, writeNdjson } from '../export.js';
import { rebuildProjections } from '../rebuild.js';

const POLLERS = 1000;
const WORKSPACES = 50;
const ADMIN = 'bench-admin';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
const round = (n: number, digits = 2) => Number(n.toFixed(digits));
/** CPU seconds this process used since `since`: on a shared machine, steadier than wall time. */
const cpuSeconds = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

/** The five events of one ticket's life as the ticket feature writes them (1 internal, 4 public). */
const ticketLife = (workspaceId: string, n: number): NewEvent[] => {
  const ticketId = randomId();
  const at = new Date().toISOString();
  const message = (i: number) => ({
    id: randomId(), type: 'message.created', workspaceId,
    data: {
      id: `${ticketId}-${i}`, message_id: `${ticketId}-${i}`, ticket_id: ticketId, sender_type: 'contact', sender_id: null, sender_name: 'Ada',
      content: `My order #${n} arrived damaged; can you send a replacement?`, is_internal: false, media: [], created_at: at,
    },
  });
  return [
    { id: randomId(), type: TICKET_OPENED, workspaceId, data: { ticket_id: ticketId, workspace_id: workspaceId, contact_id: `c${n % 997}`, subject: 'Damaged order', status: 'new', priority: 'normal', created_at: at } },
    message(0),
    { id: randomId(), type: 'ticket.assigned', workspaceId, data: { ticket_id: ticketId, operator_id: 'op1', operator_name: 'Grace', operator_avatar_url: null, status: 'open' } },
    message(1),
    { id: randomId(), type: 'ticket.closed', workspaceId, data: { ticket_id: ticketId, closed_at: at, resolution_secs: 60 } },
  ];
};

const fill = async (log: EventLog, workspaceIds: readonly string[], events: number) => {
  // Each append carries 200 tickets of one workspace; appends take the workspaces in turn.
  for (let n = 0, chunk = 0; n * 5 < events; ) {
    const batch: Promise<unknown>[] = [];
    for (let k = 0; k < 8 && n * 5 < events; k++) {
      const workspaceId = workspaceIds[chunk++ % workspaceIds.length] as string;
      const tickets = Array.from({ length: 200 }, () => ticketLife(workspaceId, n++)).flat();
      batch.push(log.append(`bench-${workspaceId}-${n}`, tickets, 'no_stream'));
    }
    await Promise.all(batch);
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-bench-updates-'));
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, RATE_LIMIT_PER_KEY: '1000000000', RATE_LIMIT_PER_IP: '1000000000' });
  const service = await startService(config);
  const agent = new Agent({ connections: POLLERS + 50 });
  try {
    const workspaces = await Promise.all(
      Array.from({ length: WORKSPACES }, async () => {
        const res = await request(`${service.url}/admin/v1/workspaces`, {
          method: 'POST', dispatcher: agent, headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bench' }),
        });
        const body = (await res.body.json()) as { workspace_id: string; api_key: string };
        return { id: body.workspace_id, key: body.api_key };
      }),
    );

    // Pollers: each chains next_offset from "now" and notes when each event reaches it.
    const received = new Map<string, number[]>();
    let polling = true;
    const start = service.core.clock();
    const poller = async (key: string) => {
      let offset = start;
      while (polling) {
        const res = await request(`${service.url}/api/v1/updates?offset=${offset}&timeout=60`, { dispatcher: agent, headers: { authorization: `Bearer ${key}` } }).catch(() => null);
        if (res === null || res.statusCode !== 200) return;
        const page = (await res.body.json()) as { items: FeedItem[]; next_offset: number };
        const now = performance.now();
        for (const item of page.items) received.get(item.id)?.push(now);
        offset = page.next_offset;
      }
    };
    const pollers = Array.from({ length: POLLERS }, (_, i) => poller((workspaces[i % WORKSPACES] as { key: string }).key));
    const notifier = service.core.notifier as MemoryNotifier;
    while (notifier.listenerCount() < POLLERS) await sleep(20);

    const idleMs = opts.long ? 10_000 : 4_000;
    const cpuBefore = process.cpuUsage();
    const idleStart = performance.now();
    await sleep(idleMs);
    const cpu = process.cpuUsage(cpuBefore);
    const idleCpuPct = ((cpu.user + cpu.system) / 1000 / (performance.now() - idleStart)) * 100;
    console.log(`${POLLERS} idle long polls over ${WORKSPACES} workspaces: process CPU ${idleCpuPct.toFixed(2)} % of one core over ${idleMs / 1000} s`);

    // One event at a time, round robin over the workspaces; each reaches its workspace's 20 pollers.
    const events = opts.long ? 1500 : 300;
    const acked = new Map<string, number>();
    for (let i = 0; i < events; i++) {
      const workspaceId = (workspaces[i % WORKSPACES] as { id: string }).id;
      const id = randomId();
      received.set(id, []);
      await service.core.log.append(`bench-live-${workspaceId}`, [{ id, type: 'operator.status.changed', workspaceId, data: { user_id: `u${i}`, status: 'online', status_text: null, status_emoji: null } }], 'any');
      acked.set(id, performance.now());
      await sleep(20);
    }
    const expected = events * (POLLERS / WORKSPACES);
    const count = () => [...received.values()].reduce((sum, times) => sum + times.length, 0);
    for (let waited = 0; count() < expected && waited < 10_000; waited += 20) await sleep(20);
    const latencies = [...received].flatMap(([id, times]) => times.map((t) => t - (acked.get(id) as number))).sort((a, b) => a - b);
    const delivered = latencies.length;
    console.log(`latency append ack → poller has it, ${delivered}/${expected} deliveries: p50 ${percentile(latencies, 50).toFixed(2)} ms, p99 ${percentile(latencies, 99).toFixed(2)} ms`);

    polling = false;
    await service.close(); // drain answers the waiting polls
    await Promise.all(pollers);

    // Export and rebuild read the log file, which the stopped service has released.
    const total = opts.long ? 1_000_000 : 300_000;
    const log = openExistingLog(dataDir);
    try {
      await fill(log, workspaces.map((w) => w.id), total);
      const devNull = createWriteStream('/dev/null');
      const exportStart = performance.now();
      const exportCpu = process.cpuUsage();
      const exported = await writeNdjson(logPages(log, { from: 0, to: Number.MAX_SAFE_INTEGER }), devNull);
      const exportSeconds = (performance.now() - exportStart) / 1000;
      const exportPerCpu = Math.round(exported / cpuSeconds(exportCpu));
      devNull.end();
      const exportRate = Math.round(exported / exportSeconds);
      console.log(`export: ${exported} public events as NDJSON in ${exportSeconds.toFixed(2)} s = ${exportRate} events/s (${exportPerCpu} per CPU second)`);
      const rebuildCpu = process.cpuUsage();
      const rebuild = await rebuildProjections(log);
      const rebuildPerCpu = Math.round(rebuild.events / cpuSeconds(rebuildCpu));
      console.log(`rebuild: ${rebuild.events} events in ${rebuild.seconds.toFixed(2)} s = ${rebuild.eventsPerSecond} events/s (${rebuildPerCpu} per CPU second; ${JSON.stringify(rebuild.documents)})`);
      return {
        bench: 'updates',
        pollers: POLLERS,
        idle_cpu_pct: round(idleCpuPct),
        deliveries: delivered,
        p50_ms: round(percentile(latencies, 50)),
        p99_ms: round(percentile(latencies, 99)),
        export_events: exported,
        export_events_per_s: exportRate,
        export_events_per_cpu_s: exportPerCpu,
        rebuild_events: rebuild.events,
        rebuild_events_per_s: rebuild.eventsPerSecond,
        rebuild_events_per_cpu_s: rebuildPerCpu,
      };
    } finally {
      await log.close();
    }
  } finally {
    await service.close();
    await agent.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await run({ long: process.argv.includes('--long') })));
  process.exit(0);
}
