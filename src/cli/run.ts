// How every command-line tool ends: its exit code, or its error as one readable line (2 and the
// usage for a command-line mistake, 1 for anything else).
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { UsageError } from './args.js';

/**
 * True when the module at `moduleUrl` is the script node was started with. Through the real path: a
 * script started through a symbolic link (a linked checkout, a bin) is still itself.
 */
export const isMain = (moduleUrl: string): boolean => {
  const started = process.argv[1];
  if (started === undefined) return false;
  try {
    return pathToFileURL(realpathSync(started)).href === moduleUrl;
  } catch {
    return false;
  }
};

export const runCommand = (name: string, run: () => Promise<number>, usage: string): void => {
  run().then(
    (code) => process.exit(code),
    (error: unknown) => {
      if (error instanceof UsageError) console.error(`${name}: ${error.message}\n\n${usage}`);
      else console.error(`${name} failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(error instanceof UsageError ? 2 : 1);
    },
  );
};
