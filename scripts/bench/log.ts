// Log benchmark: sustained concurrent appends through the SQLite EventLog, beside the ceiling (raw
// better-sqlite3 batched inserts of the same rows into the same schema, same pragmas, same run), then
// readAll throughput over what was appended, and the export of that log's public events (scripts/
// export.ts) beside it: a read-all is the export's ceiling. `npm run bench -- log`, or
// `tsx scripts/bench/log.ts [--long]`.
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { isPublicEventType } from '../../src/domain/event-types.js';
import type { ExpectedRevision, NewEvent } from '../../src/log/event-log.js';
import { APPLICATION_ID, SCHEMA, SCHEMA_VERSION, applyPragmas } from '../../src/log/sqlite-open.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { eventId } from '../../src/shared/ids.js';
import { logPages, writeNdjson } from '../export.js';

/**
 * Concurrent writers (requests in flight). Commits are fsync-bound, so the append rate grows with the
 * commands each commit carries: measured at a moderate and at a busy server's concurrency.
 */
const WRITER_COUNTS = [64, 256] as const;
const STREAMS_PER_WRITER = 64;
const STREAMS = (WRITER_COUNTS.at(-1) as number) * STREAMS_PER_WRITER;
const WORKSPACES = 32;

// Random material drawn once: the generator must not be what the benchmark measures.
const pool = Array.from({ length: 1024 }, () => randomBytes(16).toString('hex'));
const pick = (): string => pool[Math.floor(Math.random() * pool.length)] as string;
/** Event ids as the API mints them (time first, then random: src/shared/ids.ts). */
const nextId = eventId;

const NOW = new Date().toISOString();

/** A message.created event the size the API produces (spec "Events"), about 450 bytes of JSON. */
const messageCreated = (workspaceId: string, ticketId: string): NewEvent => {
  const id = nextId();
  return {
    id,
    type: 'message.created',
    workspaceId,
    data: {
      id,
      message_id: id,
      ticket_id: ticketId,
      sender_type: 'contact',
      sender_id: pick(),
      sender_name: 'Ada Lovelace',
      content: 'Hello, my order #48213 arrived damaged: the box was open and one of the two mugs is broken. Can you send a replacement or refund it? Thanks!',
      is_internal: false,
      media: [{ url: `/api/v1/media/${pick()}` }],
      created_at: NOW,
    },
  };
};

const event = (workspaceId: string, type: string, data: NewEvent['data']): NewEvent => ({ id: nextId(), type, workspaceId, data });

/**
 * The k-th append to a ticket's stream, shaped like the ticket commands' (src/domain/ticket): created
 * with its first message (internal ticket.opened, ticket.created, message.created), then replies
 * (message.created) alternating with updates (internal ticket.changed, ticket.updated); 1.5 events
 * per append on average. Like the command handler's events, they carry no metadata.
 */
const command = (workspaceId: string, ticketId: string, k: number): NewEvent[] => {
  const fields = { ticket_id: ticketId, status: 'new', priority: 'normal', contact_id: pick(), subject: 'Damaged order #48213' };
  if (k === 0) {
    return [
      event(workspaceId, 'ticket.opened', { ...fields, workspace_id: workspaceId, created_at: NOW, created_us: Date.now() * 1000 }),
      event(workspaceId, 'ticket.created', fields),
      messageCreated(workspaceId, ticketId),
    ];
  }
  if (k % 2 === 1) return [messageCreated(workspaceId, ticketId)];
  return [
    event(workspaceId, 'ticket.changed', { ticket_id: ticketId, status: 'open' }),
    event(workspaceId, 'ticket.updated', { ticket_id: ticketId, workspace_id: workspaceId }),
  ];
};

const appendPhase = async (file: string, writers: number, seconds: number) => {
  const log = openSqliteLog({ file });
  const deadline = performance.now() + seconds * 1000;
  let appended = 0;
  let calls = 0;
  const writer = async (w: number): Promise<void> => {
    const revisions = new Array<ExpectedRevision>(STREAMS_PER_WRITER).fill('no_stream');
    for (let i = 0; performance.now() < deadline; i += 1) {
      const k = i % STREAMS_PER_WRITER;
      const ticketId = `t-${w}-${k}`;
      const events = command(`ws-${(w * STREAMS_PER_WRITER + k) % WORKSPACES}`, ticketId, Math.floor(i / STREAMS_PER_WRITER));
      const { nextRevision } = await log.append(`ticket-${ticketId}`, events, revisions[k] as ExpectedRevision);
      revisions[k] = nextRevision;
      appended += events.length;
      calls += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  const elapsed = (performance.now() - started) / 1000;
  const { transactions } = log.stats();
  return { log, eventsPerS: appended / elapsed, callsPerS: calls / elapsed, appended, perCommit: appended / transactions };
};

/**
 * The same rows straight into the same schema, `perTransaction` per transaction (1000: what the
 * engine can do here).
 */
const ceilingPhase = (file: string, seconds: number, perTransaction = 1000): number => {
  const db = new Database(file);
  db.pragma('locking_mode = EXCLUSIVE');
  applyPragmas(db);
  db.exec(SCHEMA);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
  const insert = db.prepare(
    'INSERT INTO events (id, stream, revision, workspace_id, type, data, metadata, feed_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const calls = new Map<string, number>();
  const revisions = new Map<string, number>();
  let offset = Date.now() * 1000;
  const batch = db.transaction((events: readonly { stream: string; revision: number; event: NewEvent }[]) => {
    for (const { stream, revision, event } of events) {
      const eventOffset = isPublicEventType(event.type) ? (offset += 1) : null;
      insert.run(event.id, stream, revision, event.workspaceId, event.type, JSON.stringify(event.data), null, eventOffset);
    }
  });
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  let inserted = 0;
  for (let n = 0; performance.now() < deadline; ) {
    const rows: { stream: string; revision: number; event: NewEvent }[] = [];
    while (rows.length < perTransaction) {
      const ticketId = `t-${n % STREAMS}`;
      const stream = `ticket-${ticketId}`;
      const k = calls.get(stream) ?? 0;
      calls.set(stream, k + 1);
      for (const event of command(`ws-${n % WORKSPACES}`, ticketId, k)) {
        const revision = revisions.get(stream) ?? 0;
        revisions.set(stream, revision + 1);
        rows.push({ stream, revision, event });
      }
      n += 1;
    }
    batch(rows);
    inserted += rows.length;
  }
  const eventsPerS = inserted / ((performance.now() - started) / 1000);
  db.close();
  return eventsPerS;
};

/** Wall-clock and CPU rates of a read: CPU seconds are steadier than wall time on a shared machine. */
interface ReadRate {
  readonly perS: number;
  readonly perCpuS: number;
}

const timed = async (seconds: number, pass: () => Promise<number>): Promise<ReadRate> => {
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  const cpu = process.cpuUsage();
  let count = 0;
  do count += await pass();
  while (performance.now() < deadline);
  const used = process.cpuUsage(cpu);
  return { perS: count / ((performance.now() - started) / 1000), perCpuS: count / ((used.user + used.system) / 1e6) };
};

const readPhase = async (log: ReturnType<typeof openSqliteLog>, seconds: number): Promise<ReadRate> => {
  const head = await log.headPosition();
  return timed(seconds, async () => {
    let read = 0;
    for (let after = 0; after < head; ) {
      const page = await log.readAll({ after, limit: 1000 });
      read += page.length;
      after = page.at(-1)?.position ?? head;
    }
    return read;
  });
};

/** The whole log's public events as NDJSON to /dev/null, as `scripts/export.ts --out /dev/null` writes them. */
const exportPhase = (log: ReturnType<typeof openSqliteLog>, seconds: number): Promise<ReadRate> =>
  timed(seconds, async () => {
    const devNull = createWriteStream('/dev/null');
    const exported = await writeNdjson(logPages(log, { from: 0, to: Number.MAX_SAFE_INTEGER }), devNull);
    await new Promise((resolve) => devNull.end(resolve));
    return exported;
  });

const round = (n: number): number => Math.round(n);

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-log-'));
  const scale = opts.long ? 4 : 1;
  try {
    console.log(`log: concurrent writers appending ticket commands' events, ${STREAMS_PER_WRITER} streams each, ${10 * scale} s per run`);
    const figures: Record<string, number | string> = { bench: 'log' };
    let last: Awaited<ReturnType<typeof appendPhase>> | undefined;
    for (const writers of WRITER_COUNTS) {
      await last?.log.close();
      last = await appendPhase(join(dir, `log-${writers}.db`), writers, 10 * scale);
      console.log(
        `  appends   ${round(last.eventsPerS).toLocaleString('en')} events/s in ${round(last.callsPerS).toLocaleString('en')} appends/s ` +
          `from ${writers} writers (${last.appended.toLocaleString('en')} events, ${last.perCommit.toFixed(1)} events per commit)`,
      );
      figures[`events_per_s_${writers}_writers`] = round(last.eventsPerS);
    }
    const appends = last as Awaited<ReturnType<typeof appendPhase>>;
    const ceiling = ceilingPhase(join(dir, 'ceiling.db'), 8 * scale);
    console.log(`  ceiling   ${round(ceiling).toLocaleString('en')} events/s (raw better-sqlite3, 1000-row transactions, same rows, schema and pragmas)`);
    console.log(`  ratio     ${(appends.eventsPerS / ceiling).toFixed(2)} of the ceiling (${WRITER_COUNTS.at(-1)} writers)`);
    // Each commit costs an fsync however many rows it carries, and the writers' appends fill commits
    // of only so many rows: the raw inserts at that size tell that cost from the log's own.
    const perCommit = Math.round(appends.perCommit);
    const sameSize = ceilingPhase(join(dir, 'ceiling-same-size.db'), 8 * scale, perCommit);
    console.log(`  same size ${round(sameSize).toLocaleString('en')} events/s (raw, ${perCommit}-row transactions): appends ${(appends.eventsPerS / sameSize).toFixed(2)} of it`);
    const read = await readPhase(appends.log, 6 * scale);
    const rate = (r: ReadRate): string => `${round(r.perS).toLocaleString('en')} events/s, ${round(r.perCpuS).toLocaleString('en')} per CPU second`;
    console.log(`  readAll   ${rate(read)} (pages of 1000)`);
    const exported = await exportPhase(appends.log, 6 * scale);
    console.log(`  export    ${rate(exported)} (public events as NDJSON)`);
    console.log(`  ratio     ${(exported.perS / read.perS).toFixed(2)} of readAll (${(exported.perCpuS / read.perCpuS).toFixed(2)} per CPU second)`);
    await appends.log.close();
    return {
      ...figures,
      // The headline figure: the most concurrent run, the one compared with the ceiling.
      events_per_s: round(appends.eventsPerS),
      ceiling_events_per_s: round(ceiling),
      same_size_ceiling_events_per_s: round(sameSize),
      read_events_per_s: round(read.perS),
      read_events_per_cpu_s: round(read.perCpuS),
      export_events_per_s: round(exported.perS),
      export_events_per_cpu_s: round(exported.perCpuS),
      append_ratio: Number((appends.eventsPerS / ceiling).toFixed(2)),
      append_same_size_ratio: Number((appends.eventsPerS / sameSize).toFixed(2)),
      export_ratio: Number((exported.perS / read.perS).toFixed(2)),
      export_cpu_ratio: Number((exported.perCpuS / read.perCpuS).toFixed(2)),
      load_average_1m: Number(loadavg()[0]?.toFixed(2)),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await run({ long: process.argv.includes('--long') })));
}
