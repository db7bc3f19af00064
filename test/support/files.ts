// Files on disk, for tests that check what a request left behind.
import { readdirSync } from 'node:fs';
import * as path from 'node:path';

/** Every regular file under `dir`, recursively (none when `dir` is absent). */
export const filesUnder = (dir: string): string[] => {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile())
      .map((e) => path.join(e.parentPath, e.name));
  } catch {
    return [];
  }
};
