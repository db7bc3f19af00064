// MediaStore on the local filesystem: one file per object under `root`. Writes go to a unique
// `.part` file renamed into place when complete, so a reader never sees half a file.
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomId } from '../shared/ids.js';
import type { MediaStore } from './media-store.js';

// Keys are ids we generate; refusing anything else keeps every path inside root.
const KEY = /^[a-z0-9_-]+(\/[a-z0-9_-]+)*$/i;

export const createFilesystemMediaStore = (root: string): MediaStore => {
  const fileOf = (key: string) => {
    if (!KEY.test(key)) throw new Error(`invalid media key "${key}"`);
    return path.join(root, key);
  };
  return {
    async put(key, content: Readable) {
      const target = fileOf(key);
      const partial = `${target}.${randomId()}.part`;
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
  };
};
