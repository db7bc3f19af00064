// Exports public event history as NDJSON: one /updates item (envelope + offset) per line, for
// analysts. Streams page by page, so memory stays constant however long the history. From the data
// folder the lines are built from the stored event text (src/updates/feed-item.ts feedLines), with
// the filters in SQL (src/log/sqlite-export.ts).
//
//   npx tsx scripts/export.ts [--data-dir DIR] [--workspace ID] [--from T] [--to T] [--types a,b] [--out FILE]
//   npx tsx scripts/export.ts --url http://host:8080 --key API_KEY [--from T] [--to T] [--types a,b] [--out FILE]
//
// T is an offset (microseconds since the epoch) or an ISO 8601 timestamp; --from is inclusive, --to
// exclusive. Without --workspace the log export covers every workspace, in log order.
// The log file is locked by a running service (src/log/sqlite-open.ts): read it while the service is
// stopped, or export one workspace through the API with --url and --key while it runs.
import { existsSync, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import * as path from 'node:path';
import type { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { parseInstant, parseTypes } from '../src/cli/args.js';
import type { PublicEventType } from '../src/domain/event-types.js';
import { openSqliteLog, type SqliteEventLog } from '../src/log/sqlite.js';
import { feedLines, type FeedItem } from '../src/updates/feed-item.js';

export interface ExportRange {
  /** Inclusive, microseconds. */
  readonly from: number;
  /** Exclusive, microseconds. */
  readonly to: number;
  readonly types?: readonly PublicEventType[];
}

/** Whole NDJSON lines (each ends in "\n") and how many there are. */
export interface NdjsonChunk {
  readonly text: string;
  readonly lines: number;
}

/**
 * One workspace's feed (offset order) or every workspace's public events (log order), a page of lines
 * at a time. The lines are built from the stored data text (feedLines), not from parsed records.
 */
export async function* logPages(log: SqliteEventLog, range: ExportRange, workspaceId?: string): AsyncGenerator<NdjsonChunk> {
  const line = feedLines();
  for (const rows of log.exportPages({ ...range, ...(workspaceId === undefined ? {} : { workspaceId }) })) {
    let text = '';
    for (const [id, type, ws, data, offset] of rows) text += `${line({ id, type, workspaceId: ws, data, offset })}\n`;
    yield { text, lines: rows.length };
  }
}

/** Pages read through GET /api/v1/updates without waiting: works while the service runs. */
export async function* apiPages(baseUrl: string, apiKey: string, range: ExportRange): AsyncGenerator<NdjsonChunk> {
  for (let offset = range.from; ; ) {
    const query = new URLSearchParams({ offset: String(offset), limit: '1000', timeout: '0' });
    if (range.types !== undefined) query.set('types', range.types.join(','));
    const response = await fetch(`${baseUrl}/api/v1/updates?${query}`, { headers: { authorization: `Bearer ${apiKey}` } });
    if (response.status !== 200) throw new Error(`GET /api/v1/updates answered ${response.status}: ${await response.text()}`);
    const page = (await response.json()) as { items: FeedItem[]; next_offset: number };
    const inRange = page.items.filter((item) => item.offset < range.to);
    if (inRange.length > 0) yield { text: inRange.map((item) => `${JSON.stringify(item)}\n`).join(''), lines: inRange.length };
    if (page.items.length === 0 || inRange.length < page.items.length) return;
    offset = page.next_offset;
  }
}

/** Writes the chunks, honouring back-pressure; returns the number of lines. */
export const writeNdjson = async (chunks: AsyncIterable<NdjsonChunk>, out: Writable): Promise<number> => {
  let count = 0;
  for await (const chunk of chunks) {
    count += chunk.lines;
    if (!out.write(chunk.text)) await once(out, 'drain');
  }
  return count;
};

/** Opens an existing log (never creates one at a mistyped path). */
export const openExistingLog = (dataDir: string): SqliteEventLog => {
  const file = path.join(dataDir, 'events.sqlite');
  if (!existsSync(file)) throw new Error(`no event log at ${file}`);
  return openSqliteLog({ file });
};

const main = async () => {
  const { values } = parseArgs({
    options: {
      'data-dir': { type: 'string' },
      workspace: { type: 'string' },
      url: { type: 'string' },
      key: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      types: { type: 'string' },
      out: { type: 'string' },
    },
  });
  const types = parseTypes(values.types);
  const range: ExportRange = {
    from: values.from === undefined ? 0 : parseInstant(values.from),
    to: values.to === undefined ? Number.MAX_SAFE_INTEGER : parseInstant(values.to),
    ...(types === undefined ? {} : { types }),
  };
  const out = values.out === undefined ? process.stdout : createWriteStream(values.out);
  const started = performance.now();
  let count: number;
  if (values.url !== undefined) {
    if (values.key === undefined) throw new Error('--url needs --key (the workspace is the key\'s)');
    count = await writeNdjson(apiPages(values.url.replace(/\/+$/, ''), values.key, range), out);
  } else {
    const log = openExistingLog(path.resolve(values['data-dir'] ?? process.env['DATA_DIR'] ?? './data'));
    try {
      count = await writeNdjson(logPages(log, range, values.workspace), out);
    } finally {
      await log.close();
    }
  }
  if (out !== process.stdout) await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  const seconds = (performance.now() - started) / 1000;
  console.error(`exported ${count} events in ${seconds.toFixed(2)} s (${Math.round(count / Math.max(seconds, 1e-9))} events/s)`);
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(`export failed: ${(error as Error).message}`);
    process.exit(1);
  });
}
