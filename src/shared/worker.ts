// A worker thread on a module of this code base, compiled or not: compiled, the .js entry itself;
// under tsx, the .ts entry through a plain JavaScript boot file that loads it with tsx's API.
import { Worker, type WorkerOptions } from 'node:worker_threads';

/** `entry` is the worker module's URL, its extension the caller's own (`.ts` under tsx, `.js` compiled). */
export const startWorker = (entry: URL, options: WorkerOptions & { workerData: object }): Worker =>
  entry.pathname.endsWith('.ts')
    ? new Worker(new URL('./thread-boot.mjs', import.meta.url), { ...options, workerData: { ...options.workerData, entry: entry.href } })
    : new Worker(entry, options);
