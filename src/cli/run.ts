// How every command-line tool ends: its exit code, or its error as one readable line (2 and the
// usage for a command-line mistake, 1 for anything else).
import { UsageError } from './args.js';

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
