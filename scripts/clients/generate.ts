// npm run clients:generate [-- --from URL] [-- --check]
// Writes what the client helpers generate from the server: each language's typed events (from the
// event schemas of GET /api/v1/event-types: by default the code that serves them, or a running
// server's with --from) and the shared signature test vectors (from the server's signing code).
// --check writes nothing and exits 1, naming the files, when the committed ones differ.
import { readFileSync, writeFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { eventTypes } from '../../src/openapi/document.js';
import { renderAll, type EventTypeSchema } from './event-types.js';
import { testVectorsFile } from './vectors.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const VECTORS_PATH = 'clients/test-vectors.json';

export const fetchEventTypes = async (url: string): Promise<EventTypeSchema[]> => {
  const response = await fetch(new URL('/api/v1/event-types', url));
  if (!response.ok) throw new Error(`GET ${response.url} answered ${response.status}`);
  return ((await response.json()) as { items: EventTypeSchema[] }).items;
};

/** Every generated file by its path from the repository root. */
export const generatedFiles = (items: readonly EventTypeSchema[]): Readonly<Record<string, string>> => ({
  ...renderAll(items),
  [VECTORS_PATH]: testVectorsFile(),
});

/** The generated files whose committed content differs from what generation gives now. */
export const staleFiles = (files: Readonly<Record<string, string>>): string[] =>
  Object.entries(files)
    .filter(([file, content]) => {
      try {
        return readFileSync(path.join(ROOT, file), 'utf8') !== content;
      } catch {
        return true;
      }
    })
    .map(([file]) => file);

const main = async (): Promise<void> => {
  const { values } = parseArgs({ options: { from: { type: 'string' }, check: { type: 'boolean', default: false }, help: { type: 'boolean', default: false } } });
  if (values.help) {
    console.log('usage: npm run clients:generate [-- --from http://localhost:8080] [-- --check]');
    return;
  }
  const files = generatedFiles(values.from === undefined ? eventTypes().items : await fetchEventTypes(values.from));
  if (values.check) {
    const stale = staleFiles(files);
    if (stale.length > 0) {
      console.error(`clients:generate: out of date (run npm run clients:generate): ${stale.join(', ')}`);
      process.exitCode = 1;
    }
    return;
  }
  for (const [file, content] of Object.entries(files)) {
    writeFileSync(path.join(ROOT, file), content);
    console.log(`wrote ${file}`);
  }
};

if (process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
