// Rebuilds every read model from the log from scratch, in one pass over the log, and reports
// events/s, in memory: a check that every event applies cleanly, and a measurement of what a start
// costs where the read models are rebuilt (an API server without Redis; the embedded service rebuilds
// its read-model file like this when it is new or was built from another log).
//
//   npx tsx scripts/rebuild.ts [--data-dir DIR]
//
// Like the export, it needs the log file unlocked: run it while the service is stopped.
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { PROJECTIONS } from '../projections/registry.js';
import { applier } from '../projections/tickets-store.js';
import { memoryDocumentStores } from '../projections/tickets-store-memory.js';
import { createWorkspaceDirectory } from '../projections/workspace-directory.js';
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

export const rebuildProjections = async (log: EventLog, pageSize = 5000): Promise<RebuildReport> => {
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
    const last = page.at(-1);
    if (last === undefined) break;
    after = last.position;
  }
  const seconds = (performance.now() - started) / 1000;
  const documents: Record<string, number> = {};
  for (const target of all) documents[target.name] = await target.size();
  return { events, seconds, eventsPerSecond: Math.round(events / Math.max(seconds, 1e-9)), documents };
};

const main = async () => {
  const { values } = parseArgs({ options: { 'data-dir': { type: 'string' } } });
  const config = loadConfig({ ...process.env, ...(values['data-dir'] === undefined ? {} : { DATA_DIR: values['data-dir'] }) });
  const log = openExistingLog(path.resolve(config.dataDir));
  try {
    const report = await rebuildProjections(log);
    for (const [name, count] of Object.entries(report.documents)) console.log(`${name}: ${count} documents`);
    console.log(`rebuilt from ${report.events} events in ${report.seconds.toFixed(2)} s (${report.eventsPerSecond} events/s)`);
  } finally {
    await log.close();
  }
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  main().catch((error: unknown) => {
    console.error(`rebuild failed: ${(error as Error).message}`);
    process.exit(1);
  });
}
