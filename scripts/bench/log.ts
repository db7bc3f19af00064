// Log benchmark: sustained concurrent appends through the SQLite EventLog, beside the ceiling (raw
// better-sqlite3 batched inserts of the same rows into the same schema, same pragmas, same run), then
// readAll throughput over what was appended. `npm run bench -- log`, or `tsx scripts/bench/log.ts [--long]`.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import type { ExpectedRevision, NewEvent } from '../../src/log/event-log.js';
import { APPLICATION_ID, SCHEMA, SCHEMA_VERSION, applyPragmas } from '../../src/log/sqlite-open.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const WRITERS = 64;
const STREAMS_PER_WRITER = 64;
const WORKSPACES = 32;

// Random material drawn once: the generator must not be what the benchmark measures.
const pool = Array.from({ length: 1024 }, () => randomBytes(16).toString('hex'));
const idPrefix = randomBytes(8).toString('hex');
let counter = 0;
const pick = (): string => pool[Math.floor(Math.random() * pool.length)] as string;
/** Unique 32-hex ids in random order, like the API's (a counter alone would insert in key order). */
const nextId = (): string => `${pick().slice(0, 16)}${idPrefix.slice(0, 4)}${(counter++).toString(16).padStart(12, '0')}`;

/** A message.created event the size the API produces (spec "Events"), about 600 bytes of JSON. */
const messageCreated = (workspaceId: string, ticketId: string): NewEvent => {
  const id = nextId();
  return {
    id,
    type: 'message.created',
    workspaceId,
    data: {
      id,
      message_id: nextId(),
      ticket_id: ticketId,
      sender_type: 'contact',
      sender_id: pick(),
      sender_name: 'Ada Lovelace',
      content: 'Hello, my order #48213 arrived damaged: the box was open and one of the two mugs is broken. Can you send a replacement or refund it? Thanks!',
      is_internal: false,
      media: [{ url: `/api/v1/media/${pick()}` }],
      created_at: new Date().toISOString(),
    },
    metadata: { correlation_id: pick(), causation_id: pick(), actor: `contact:${pick().slice(0, 16)}` },
  };
};

const appendPhase = async (file: string, seconds: number) => {
  const log = openSqliteLog({ file });
  const deadline = performance.now() + seconds * 1000;
  let appended = 0;
  const writer = async (w: number): Promise<void> => {
    const revisions = new Array<ExpectedRevision>(STREAMS_PER_WRITER).fill('no_stream');
    for (let i = 0; performance.now() < deadline; i += 1) {
      const k = i % STREAMS_PER_WRITER;
      const ticketId = `t-${w}-${k}`;
      const { nextRevision } = await log.append(`ticket-${ticketId}`, [messageCreated(`ws-${(w * STREAMS_PER_WRITER + k) % WORKSPACES}`, ticketId)], revisions[k] as ExpectedRevision);
      revisions[k] = nextRevision;
      appended += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
  const elapsed = (performance.now() - started) / 1000;
  const { transactions, writes } = log.stats();
  return { log, eventsPerS: appended / elapsed, appended, perCommit: writes / transactions };
};

/** The same rows straight into the same schema, 1000 per transaction: what the engine can do here. */
const ceilingPhase = (file: string, seconds: number): number => {
  const db = new Database(file);
  db.pragma('locking_mode = EXCLUSIVE');
  applyPragmas(db);
  db.exec(SCHEMA);
  db.pragma(`application_id = ${APPLICATION_ID}`);
  db.pragma(`user_version = ${SCHEMA_VERSION}`);
  const insert = db.prepare(
    'INSERT INTO events (id, stream, revision, workspace_id, type, data, metadata, feed_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const revisions = new Map<string, number>();
  let offset = Date.now() * 1000;
  const batch = db.transaction((events: readonly { stream: string; event: NewEvent }[]) => {
    for (const { stream, event } of events) {
      const revision = (revisions.get(stream) ?? -1) + 1;
      revisions.set(stream, revision);
      offset += 1;
      insert.run(event.id, stream, revision, event.workspaceId, event.type, JSON.stringify(event.data), JSON.stringify(event.metadata), offset);
    }
  });
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  let inserted = 0;
  while (performance.now() < deadline) {
    const rows = Array.from({ length: 1000 }, (_, i) => {
      const ticketId = `t-${(inserted + i) % (WRITERS * STREAMS_PER_WRITER)}`;
      return { stream: `ticket-${ticketId}`, event: messageCreated(`ws-${(inserted + i) % WORKSPACES}`, ticketId) };
    });
    batch(rows);
    inserted += rows.length;
  }
  const eventsPerS = inserted / ((performance.now() - started) / 1000);
  db.close();
  return eventsPerS;
};

const readPhase = async (log: ReturnType<typeof openSqliteLog>, seconds: number): Promise<number> => {
  const head = await log.headPosition();
  const deadline = performance.now() + seconds * 1000;
  const started = performance.now();
  let read = 0;
  do {
    for (let after = 0; after < head; ) {
      const page = await log.readAll({ after, limit: 1000 });
      read += page.length;
      after = page.at(-1)?.position ?? head;
    }
  } while (performance.now() < deadline);
  return read / ((performance.now() - started) / 1000);
};

const round = (n: number): number => Math.round(n);

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-log-'));
  const scale = opts.long ? 4 : 1;
  try {
    console.log(`log: ${WRITERS} concurrent writers appending message.created events to ${WRITERS * STREAMS_PER_WRITER} streams, ${15 * scale} s`);
    const appends = await appendPhase(join(dir, 'log.db'), 15 * scale);
    console.log(`  appends   ${round(appends.eventsPerS).toLocaleString('en')} events/s (${appends.appended.toLocaleString('en')} events, ${appends.perCommit.toFixed(1)} appends per commit)`);
    const ceiling = ceilingPhase(join(dir, 'ceiling.db'), 8 * scale);
    console.log(`  ceiling   ${round(ceiling).toLocaleString('en')} events/s (raw better-sqlite3, 1000-row transactions, same schema and pragmas)`);
    console.log(`  ratio     ${(appends.eventsPerS / ceiling).toFixed(2)} of the ceiling`);
    const read = await readPhase(appends.log, 6 * scale);
    console.log(`  readAll   ${round(read).toLocaleString('en')} events/s (pages of 1000)`);
    await appends.log.close();
    return { bench: 'log', events_per_s: round(appends.eventsPerS), ceiling_events_per_s: round(ceiling), read_events_per_s: round(read) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(await run({ long: process.argv.includes('--long') })));
}
