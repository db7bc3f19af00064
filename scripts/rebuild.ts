// Rebuilds every read model from the log from scratch, in one pass over the log, and reports
// events/s, in memory: a check that every event applies cleanly, and a measurement of what a start
// costs where the read models are rebuilt (an API server without Redis; the embedded service rebuilds
// its read-model file like this when it is new or was built from another log).
//
// Usage: REBUILD_USAGE below (--help prints it).
import * as path from 'node:path';
import { PROJECTIONS } from '../projections/registry.js';
import { applier } from '../projections/tickets-store.js';
import { memoryDocumentStores } from '../projections/tickets-store-memory.js';
import { createWorkspaceDirectory } from '../projections/workspace-directory.js';
import { parseCommandLine } from '../src/cli/args.js';
import { progressReporter } from '../src/cli/progress.js';
import { isMain, runCommand } from '../src/cli/run.js';
import { loadConfig } from '../src/config/config.js';
import type { EventLog, RecordedEvent } from '../src/log/event-log.js';
import { openExistingLog } from './export.js';

interface Target {
  readonly name: string;
  readonly types: ReadonlySet<string>;
  readonly apply: (event: RecordedEvent) => Promise<void> | void;
  readonly size: () => Promise<number> | number;
}

export interface RebuildReport {
  /** Events read from the log (those of a type some read model uses). */
  readonly events: number;
  readonly seconds: number;
  readonly eventsPerSecond: number;
  /** Documents (or rows) per read model after the rebuild. */
  readonly documents: Readonly<Record<string, number>>;
}

const targets = (): Target[] => {
  const directory = createWorkspaceDirectory();
  return [
    { name: 'workspace-directory', types: new Set(directory.types), apply: directory.apply, size: directory.count },
    ...PROJECTIONS.map((projection): Target => {
      const store = memoryDocumentStores.open(projection);
      return { name: projection.name, types: new Set(projection.types), apply: applier(projection, store), size: async () => (await store.dump()).size };
    }),
  ];
};

/** `progress` hears the count of events applied after each page. */
export const rebuildProjections = async (log: EventLog, pageSize = 5000, progress?: (events: number) => void): Promise<RebuildReport> => {
  const all = targets();
  const types = [...new Set(all.flatMap((t) => [...t.types]))];
  const started = performance.now();
  let events = 0;
  for (let after = 0; ; ) {
    const page = await log.readAll({ after, types, limit: pageSize });
    for (const event of page) {
      for (const target of all) if (target.types.has(event.type)) await target.apply(event);
    }
    events += page.length;
    progress?.(events);
    const last = page.at(-1);
    if (last === undefined) break;
    after = last.position;
  }
  const seconds = (performance.now() - started) / 1000;
  const documents: Record<string, number> = {};
  for (const target of all) documents[target.name] = await target.size();
  return { events, seconds, eventsPerSecond: Math.round(events / Math.max(seconds, 1e-9)), documents };
};

export const REBUILD_USAGE = `Usage: npx tsx scripts/rebuild.ts [--data-dir DIR]

Rebuilds every read model from the log in memory, in one pass, and reports the documents per read
model and the events/s: a check that every event applies cleanly. It reads the log of a stopped
service (DIR: default $DATA_DIR, else ./data) and changes nothing.

  -h, --help   this text

Progress goes to stderr every 2 s.`;

const main = async (): Promise<number> => {
  const values = parseCommandLine({ options: { 'data-dir': { type: 'string' }, help: { type: 'boolean', short: 'h' } } });
  if (values.help === true) {
    console.log(REBUILD_USAGE);
    return 0;
  }
  const config = loadConfig({ ...process.env, ...(values['data-dir'] === undefined ? {} : { DATA_DIR: values['data-dir'] }) });
  const log = openExistingLog(path.resolve(config.dataDir));
  try {
    const report = await rebuildProjections(log, 5000, progressReporter('rebuilt'));
    for (const [name, count] of Object.entries(report.documents)) console.log(`${name}: ${count} documents`);
    console.log(`rebuilt from ${report.events} events in ${report.seconds.toFixed(2)} s (${report.eventsPerSecond} events/s)`);
  } finally {
    await log.close();
  }
  return 0;
};

if (isMain(import.meta.url)) runCommand('rebuild', main, REBUILD_USAGE);
