// Log benchmark: sustained concurrent appends through the SQLite EventLog, beside the ceiling (raw
// better-sqlite3 batched inserts of the same rows into the same schema, same pragmas, in rounds with the appends), then
// readAll throughput over what was appended, and the export of that log's public events (scripts/
// export.ts) beside it: a read-all is the export's ceiling. `npm run bench -- log`, or
// `tsx scripts/bench/log.ts [--long]`.
//
// Three ceilings, each raw inserts of the same rows: 1000-row transactions with consecutive appends
// on consecutive streams (the figure tracked since the first), transactions the size of the appends' commits, and
// the same size with each transaction's appends on the streams the writers' commits touch (one
// append per writer, each on another of its streams). The last is the like-for-like one: a commit
// costs a page written per index page its rows dirty, and consecutive streams share the pages of the
// (stream, revision) index where the writers' streams, spread over the index, dirty one each.
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

/**
 * Runs of one kind added up: how many, the events they counted, and the wall and CPU seconds they
 * took (CPU time is steadier than wall time on a shared machine).
 */
interface Tally {
  passes: number;
  events: number;
  wallS: number;
  cpuS: number;
}

const tally = (): Tally => ({ passes: 0, events: 0, wallS: 0, cpuS: 0 });

const cpuSecondsSince = (since: NodeJS.CpuUsage): number => {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
};

/** One run's tally: `events` since `started` (performance.now()) and `cpu` (process.cpuUsage()). */
const runOf = (events: number, started: number, cpu: NodeJS.CpuUsage): Tally => ({
  passes: 1,
  events,
  wallS: (performance.now() - started) / 1000,
  cpuS: cpuSecondsSince(cpu),
});

const appendPhase = async (file: string, writers: number, seconds: number) => {
  const cpu = process.cpuUsage();
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
  return { log, run: runOf(appended, started, cpu), calls, commits: log.stats().transactions };
};

/**
 * Which stream the n-th append of a ceiling goes to: `sequential`, consecutive appends on
 * consecutive streams; `writers`, as appendPhase's writers' commits have them (append n by writer
 * n mod writers, on the next of its streams), with their workspaces.
 */
const streamOf = (order: 'sequential' | 'writers', n: number, writers: number): { ticketId: string; workspaceId: string } => {
  if (order === 'sequential') return { ticketId: `t-${n % STREAMS}`, workspaceId: `ws-${n % WORKSPACES}` };
  const w = n % writers;
  const k = Math.floor(n / writers) % STREAMS_PER_WRITER;
  return { ticketId: `t-${w}-${k}`, workspaceId: `ws-${(w * STREAMS_PER_WRITER + k) % WORKSPACES}` };
};

/**
 * The same rows straight into the same schema, `perTransaction` per transaction (1000: what the
 * engine can do here), the streams in `order`.
 */
const ceilingPhase = (file: string, seconds: number, perTransaction = 1000, order: 'sequential' | 'writers' = 'sequential') => {
  const cpu = process.cpuUsage();
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
      const { ticketId, workspaceId } = streamOf(order, n, WRITER_COUNTS.at(-1) as number);
      const stream = `ticket-${ticketId}`;
      const k = calls.get(stream) ?? 0;
      calls.set(stream, k + 1);
      for (const event of command(workspaceId, ticketId, k)) {
        const revision = revisions.get(stream) ?? 0;
        revisions.set(stream, revision + 1);
        rows.push({ stream, revision, event });
      }
      n += 1;
    }
    batch(rows);
    inserted += rows.length;
  }
  // Before the close, whose checkpoint the appends' figures leave out too.
  const run = runOf(inserted, started, cpu);
  db.close();
  return run;
};

/** Adds a run (or a tally of several) to the tally of its kind. */
const add = (into: Tally, run: Tally): void => {
  into.passes += run.passes;
  into.events += run.events;
  into.wallS += run.wallS;
  into.cpuS += run.cpuS;
};

/** Runs one pass, adding it to `into`. */
const timed = async (into: Tally, pass: () => Promise<number>): Promise<void> => {
  const started = performance.now();
  const cpu = process.cpuUsage();
  add(into, runOf(await pass(), started, cpu));
};

/** Every event of the log (internal ones too), a page of 1000 records at a time. */
const readPass = (log: ReturnType<typeof openSqliteLog>, head: number) => async (): Promise<number> => {
  let read = 0;
  for (let after = 0; after < head; ) {
    const page = await log.readAll({ after, limit: 1000 });
    read += page.length;
    after = page.at(-1)?.position ?? head;
  }
  return read;
};

/** The whole log's public events as NDJSON to /dev/null, as `scripts/export.ts --out /dev/null` writes them. */
const exportPass = (log: ReturnType<typeof openSqliteLog>) => async (): Promise<number> => {
  const devNull = createWriteStream('/dev/null');
  const exported = await writeNdjson(logPages(log, { from: 0, to: Number.MAX_SAFE_INTEGER }), devNull);
  await new Promise((resolve) => devNull.end(resolve));
  return exported;
};

/**
 * readAll and export of one log, a pass of each in turn for about `seconds`, after a pass of each to
 * warm up: the two phases run one after the other measured the machine's load as much as the code
 * (the other processes of a shared machine took the CPU from one phase and not the other), and the
 * first pass of each ran before the JIT had compiled it.
 */
const readPhases = async (log: ReturnType<typeof openSqliteLog>, seconds: number) => {
  const head = await log.headPosition();
  const [read, exported] = [readPass(log, head), exportPass(log)];
  await read();
  await exported();
  const totals = { read: tally(), exported: tally() };
  const started = performance.now();
  do {
    await timed(totals.read, read);
    await timed(totals.exported, exported);
  } while (performance.now() - started < seconds * 1000);
  return totals;
};

const round = (n: number): number => Math.round(n);
const ratio = (n: number): number => Number(n.toFixed(2));

const perS = (t: Tally): number => t.events / t.wallS;
const perCpuS = (t: Tally): number => t.events / t.cpuS;
const cpuMicros = (t: Tally): number => 1e6 / perCpuS(t);

/**
 * Rounds of the most concurrent appends and the three ceilings, each round all four in turn: run once
 * each, the appends first, they met different loads (the write-back of the previous run's checkpoint,
 * other processes' bursts), and the like-for-like ratio of the same code ranged from 0.59 to 0.79.
 */
const ROUNDS = 3;

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-log-'));
  const scale = opts.long ? 4 : 1;
  try {
    const [fewer, most] = WRITER_COUNTS;
    console.log(
      `log: concurrent writers appending ticket commands' events, ${STREAMS_PER_WRITER} streams each: ${fewer} writers for ${10 * scale} s, ` +
        `then ${ROUNDS} rounds of ${most} writers (${4 * scale} s) and each raw-insert ceiling (${3 * scale} s), in turn`,
    );
    const rateOf = (t: Tally): string => `${round(perS(t)).toLocaleString('en')} events/s, ${cpuMicros(t).toFixed(1)} CPU µs per event`;
    const first = await appendPhase(join(dir, `log-${fewer}.db`), fewer, 10 * scale);
    await first.log.close();
    console.log(
      `  appends   ${rateOf(first.run)} in ${round(first.calls / first.run.wallS).toLocaleString('en')} appends/s ` +
        `from ${fewer} writers (${(first.run.events / first.commits).toFixed(1)} events per commit)`,
    );
    const kinds = { appends: tally(), ceiling: tally(), sameSize: tally(), writersOrder: tally() };
    let calls = 0;
    let commits = 0;
    let last: Awaited<ReturnType<typeof appendPhase>> | undefined;
    for (let r = 0; r < ROUNDS; r += 1) {
      await last?.log.close();
      last = await appendPhase(join(dir, `log-${most}-${r}.db`), most, 4 * scale);
      add(kinds.appends, last.run);
      calls += last.calls;
      commits += last.commits;
      // Each commit costs an fsync however many rows it carries, and the writers' appends fill commits
      // of only so many rows (one append per writer): the raw inserts at that size tell that cost from the log's own.
      const perCommit = Math.round(last.run.events / last.commits);
      add(kinds.ceiling, ceilingPhase(join(dir, `ceiling-${r}.db`), 3 * scale));
      add(kinds.sameSize, ceilingPhase(join(dir, `ceiling-same-size-${r}.db`), 3 * scale, perCommit));
      add(kinds.writersOrder, ceilingPhase(join(dir, `ceiling-writers-order-${r}.db`), 3 * scale, perCommit, 'writers'));
    }
    const appends = last as Awaited<ReturnType<typeof appendPhase>>;
    const perCommit = Math.round(kinds.appends.events / commits);
    console.log(
      `  appends   ${rateOf(kinds.appends)} in ${round(calls / kinds.appends.wallS).toLocaleString('en')} appends/s ` +
        `from ${most} writers (${round(kinds.appends.events).toLocaleString('en')} events over ${ROUNDS} rounds, ${(kinds.appends.events / commits).toFixed(1)} events per commit)`,
    );
    const against = (what: string, ceiling: Tally): number => {
      console.log(
        `  ${what}: ${rateOf(ceiling)}; appends ${(perS(kinds.appends) / perS(ceiling)).toFixed(2)} of it (${(cpuMicros(ceiling) / cpuMicros(kinds.appends)).toFixed(2)} per CPU second)`,
      );
      return perS(kinds.appends) / perS(ceiling);
    };
    const ceilingRatio = against('ceiling (raw better-sqlite3, 1000-row transactions, consecutive streams, same rows, schema and pragmas)', kinds.ceiling);
    const sameSizeRatio = against(`same size (raw, ${perCommit}-row transactions, consecutive streams)`, kinds.sameSize);
    const writersOrderRatio = against(`same size, writers' streams (raw, ${perCommit}-row transactions, one append on each of ${most} writers' streams)`, kinds.writersOrder);
    const { read, exported } = await readPhases(appends.log, 12 * scale);
    const rate = (t: Tally): string => `${round(perS(t)).toLocaleString('en')} events/s, ${round(perCpuS(t)).toLocaleString('en')} per CPU second`;
    // The export writes the public events only; a pass covers the whole log as a readAll pass does.
    const logEvents = read.events / read.passes;
    const coveredPerS = (exported.passes * logEvents) / exported.wallS;
    const coveredPerCpuS = (exported.passes * logEvents) / exported.cpuS;
    console.log(`  readAll   ${rate(read)}: every event of the log, internal ones too (${round(logEvents).toLocaleString('en')}), pages of 1000; ${read.passes} passes`);
    console.log(`  export    ${rate(exported)}: public events only (${round(exported.events / exported.passes).toLocaleString('en')} of the log's), as NDJSON; ${exported.passes} passes, each after one of readAll's`);
    console.log(`  ratio     ${(perS(exported) / perS(read)).toFixed(2)} of readAll in events each counts (${(perCpuS(exported) / perCpuS(read)).toFixed(2)} per CPU second)`);
    console.log(
      `  coverage  the export covers the log at ${round(coveredPerS).toLocaleString('en')} log events/s: ${(coveredPerS / perS(read)).toFixed(2)} of readAll's rate over the same log ` +
        `(${(coveredPerCpuS / perCpuS(read)).toFixed(2)} per CPU second)`,
    );
    await appends.log.close();
    return {
      bench: 'log',
      [`events_per_s_${fewer}_writers`]: round(perS(first.run)),
      [`events_per_s_${most}_writers`]: round(perS(kinds.appends)),
      // The headline figure: the most concurrent runs, the ones compared with the ceilings.
      events_per_s: round(perS(kinds.appends)),
      append_cpu_us_per_event: ratio(cpuMicros(kinds.appends)),
      ceiling_events_per_s: round(perS(kinds.ceiling)),
      same_size_ceiling_events_per_s: round(perS(kinds.sameSize)),
      writers_order_ceiling_events_per_s: round(perS(kinds.writersOrder)),
      append_ratio: ratio(ceilingRatio),
      append_same_size_ratio: ratio(sameSizeRatio),
      append_writers_order_ratio: ratio(writersOrderRatio),
      append_writers_order_cpu_ratio: ratio(cpuMicros(kinds.writersOrder) / cpuMicros(kinds.appends)),
      read_events_per_s: round(perS(read)),
      read_events_per_cpu_s: round(perCpuS(read)),
      export_events_per_s: round(perS(exported)),
      export_events_per_cpu_s: round(perCpuS(exported)),
      export_ratio: ratio(perS(exported) / perS(read)),
      export_cpu_ratio: ratio(perCpuS(exported) / perCpuS(read)),
      export_coverage_ratio: ratio(coveredPerS / perS(read)),
      export_coverage_cpu_ratio: ratio(coveredPerCpuS / perCpuS(read)),
      load_average_1m: Number(loadavg()[0]?.toFixed(2)),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await run({ long: process.argv.includes('--long') })));
}
