// MediaStore on the local filesystem: one file per object under `root`. Writes go to a unique
// `.part` file renamed into place when complete, so a reader never sees half a file. The part's name
// carries the writing process's id, so a later start can tell a crash's leftovers from a write that
// another process on the same folder is still making.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomId } from '../shared/ids.js';
import { isAlive } from '../shared/process-alive.js';
import type { MediaStore } from './media-store.js';

// Keys are ids we generate; refusing anything else keeps every path inside root.
const KEY = /^[a-z0-9_-]+(\/[a-z0-9_-]+)*$/i;
const PART = /\.(\d+)\.[0-9a-z]+\.part$/i;
/** A part untouched this long is abandoned whoever wrote it (uploads are bounded by the request timeout). */
const STALE_PART_MS = 60 * 60 * 1000;

/** Every `.part` file under `dir`, recursively (none when `dir` is absent). */
const partsUnder = async (dir: string): Promise<string[]> => {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  return entries.filter((e) => e.isFile() && PART.test(e.name)).map((e) => path.join(e.parentPath, e.name));
};

export const createFilesystemMediaStore = (root: string): MediaStore => {
  const fileOf = (key: string) => {
    if (!KEY.test(key)) throw new Error(`invalid media key "${key}"`);
    return path.join(root, key);
  };
  return {
    async put(key, content: Readable) {
      const target = fileOf(key);
      const partial = `${target}.${process.pid}.${randomId()}.part`;
      try {
        await mkdir(path.dirname(target), { recursive: true });
        const file = createWriteStream(partial, { flags: 'wx' });
        await pipeline(content, file);
        await rename(partial, target);
        return file.bytesWritten;
      } catch (error) {
        content.destroy(error as Error);
        // The write's own error is the one to report; a failed clean-up must not replace it.
        await rm(partial, { force: true }).catch(() => undefined);
        throw error;
      }
    },
    async open(key) {
      const file = fileOf(key);
      const info = await stat(file).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return null;
        throw error;
      });
      return info === null || !info.isFile() ? null : { stream: createReadStream(file), size: info.size };
    },
    async removeAbandoned() {
      let removed = 0;
      for (const part of await partsUnder(root)) {
        const pid = Number(PART.exec(part)?.[1]);
        const info = await stat(part).catch(() => null);
        if (info === null || (isAlive(pid) && Date.now() - info.mtimeMs < STALE_PART_MS)) continue;
        await rm(part, { force: true });
        removed += 1;
      }
      return removed;
    },
  };
};
