// Exports public event history as NDJSON: one /updates item (envelope + offset) per line, for
// analysts. Streams page by page, so memory stays constant however long the history. From the data
// folder the lines are built from the stored event text (src/updates/feed-item.ts feedLines), with
// the filters in SQL (src/log/sqlite-export.ts).
//
// Usage: EXPORT_USAGE below (--help prints it).
import { existsSync, createWriteStream } from 'node:fs';
import { once } from 'node:events';
import * as path from 'node:path';
import type { Writable } from 'node:stream';
import { parseCommandLine, parseInstant, parseTypes, UsageError } from '../src/cli/args.js';
import { progressReporter } from '../src/cli/progress.js';
import { isMain, runCommand } from '../src/cli/run.js';
import { workspaceStream } from '../src/domain/workspace/workspace.js';
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

/** Whole NDJSON lines (each ends in "\n"), as text or its UTF-8 bytes, and how many there are. */
export interface NdjsonChunk {
  readonly text: string | Buffer;
  readonly lines: number;
}

/**
 * One workspace's feed (offset order) or every workspace's public events (log order), a page of lines
 * at a time. The lines are built around the stored data text (feedLines), not from parsed records.
 */
export async function* logPages(log: SqliteEventLog, range: ExportRange, workspaceId?: string): AsyncGenerator<NdjsonChunk> {
  const ndjsonOf = feedLines();
  for (const rows of log.exportPages({ ...range, ...(workspaceId === undefined ? {} : { workspaceId }) })) {
    yield { text: ndjsonOf(rows.map(([id, type, workspaceId, data, offset]) => ({ id, type, workspaceId, data, offset }))), lines: rows.length };
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

/** Writes the chunks, honouring back-pressure; returns the number of lines. `progress` hears the count after each chunk. */
export const writeNdjson = async (chunks: AsyncIterable<NdjsonChunk>, out: Writable, progress?: (count: number) => void): Promise<number> => {
  let count = 0;
  for await (const chunk of chunks) {
    count += chunk.lines;
    if (!out.write(chunk.text)) await once(out, 'drain');
    progress?.(count);
  }
  return count;
};

/** Opens an existing log (never creates one at a mistyped path). */
export const openExistingLog = (dataDir: string): SqliteEventLog => {
  const file = path.join(dataDir, 'events.sqlite');
  if (!existsSync(file)) throw new Error(`no event log at ${file}`);
  return openSqliteLog({ file });
};

/** Fails naming the workspace when the log has never seen it: a mistyped id must not export 0 events silently. */
export const requireWorkspace = async (log: SqliteEventLog, workspaceId: string, dataDir: string): Promise<void> => {
  if ((await log.readStream(workspaceStream(workspaceId))).length === 0) throw new Error(`no workspace ${workspaceId} in ${path.join(dataDir, 'events.sqlite')}`);
};

export const EXPORT_USAGE = `Usage: npx tsx scripts/export.ts [--data-dir DIR] [--workspace ID] [--from T] [--to T] [--types A,B] [--out FILE]
       npx tsx scripts/export.ts --url URL --key API_KEY [--from T] [--to T] [--types A,B] [--out FILE]

Writes public events as NDJSON, one /api/v1/updates item (envelope + offset) per line, in offset order.

  --data-dir DIR   read the log of a stopped service (default $DATA_DIR, else ./data); every workspace
                   in log order unless --workspace names one (an unknown id is an error)
  --url, --key     read one workspace (the key's) through a running service instead
  --from T         first offset, inclusive (default 0); T is microseconds or an ISO 8601 timestamp
  --to T           end, exclusive (default: the end of the log)
  --types A,B      only these event types
  --out FILE       write there instead of stdout
  -h, --help       this text

Progress goes to stderr every 2 s, and the count and rate at the end.`;

const main = async (): Promise<number> => {
  const values = parseCommandLine({
    options: {
      'data-dir': { type: 'string' },
      workspace: { type: 'string' },
      url: { type: 'string' },
      key: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      types: { type: 'string' },
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    console.log(EXPORT_USAGE);
    return 0;
  }
  if (values.url !== undefined && values.key === undefined) throw new UsageError('--url needs --key (the workspace is the key\'s)');
  if (values.url !== undefined && (values.workspace !== undefined || values['data-dir'] !== undefined)) throw new UsageError('--url reads the key\'s workspace: --workspace and --data-dir are for the log');
  const types = parseTypes(values.types);
  const range: ExportRange = {
    from: values.from === undefined ? 0 : parseInstant(values.from),
    to: values.to === undefined ? Number.MAX_SAFE_INTEGER : parseInstant(values.to),
    ...(types === undefined ? {} : { types }),
  };
  const progress = progressReporter('exported');
  const started = performance.now();
  let count: number;
  let out: Writable = process.stdout;
  if (values.url !== undefined) {
    if (values.out !== undefined) out = createWriteStream(values.out);
    count = await writeNdjson(apiPages(values.url.replace(/\/+$/, ''), values.key as string, range), out, progress);
  } else {
    const dataDir = path.resolve(values['data-dir'] ?? process.env['DATA_DIR'] ?? './data');
    const log = openExistingLog(dataDir);
    try {
      if (values.workspace !== undefined) await requireWorkspace(log, values.workspace, dataDir);
      if (values.out !== undefined) out = createWriteStream(values.out);
      count = await writeNdjson(logPages(log, range, values.workspace), out, progress);
    } finally {
      await log.close();
    }
  }
  if (out !== process.stdout) await new Promise<void>((resolve, reject) => out.end((error?: Error | null) => (error ? reject(error) : resolve())));
  const seconds = (performance.now() - started) / 1000;
  console.error(`exported ${count} events in ${seconds.toFixed(2)} s (${Math.round(count / Math.max(seconds, 1e-9))} events/s)`);
  return 0;
};

if (isMain(import.meta.url)) runCommand('export', main, EXPORT_USAGE);
