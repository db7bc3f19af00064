// The listen command's state file: the offset of the next event to forward. Written whole to a
// temporary file, flushed, then renamed over the old one, so a crash or a kill leaves either the old
// offset or the new one, never a torn file.
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { UsageError } from '../args.js';

/** The saved offset, or null when the file does not exist yet. */
export const readState = (file: string): number | null => {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  const offset = (JSON.parse(text) as { offset?: unknown }).offset;
  if (typeof offset !== 'number' || !Number.isSafeInteger(offset) || offset < 0) throw new UsageError(`${file} is not a listen state file (no "offset")`);
  return offset;
};

export const writeState = (file: string, offset: number): void => {
  const temporary = `${file}.tmp`;
  const fd = openSync(temporary, 'w');
  try {
    writeSync(fd, `${JSON.stringify({ offset })}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temporary, file);
};
