// A worker thread on a module of this code base, compiled or not: compiled, the .js entry itself;
// under tsx, the .ts entry through a plain JavaScript boot file that loads it with tsx's API.
import { Worker, type WorkerOptions } from 'node:worker_threads';

type Options = WorkerOptions & { workerData: object };

/** The module a Worker runs for `entry` (the worker module's URL, `.ts` under tsx, `.js` compiled), and its options. */
export const workerArgs = (entry: URL, options: Options): [URL, Options] =>
  entry.pathname.endsWith('.ts')
    ? [new URL('./thread-boot.mjs', import.meta.url), { ...options, workerData: { ...options.workerData, entry: entry.href } }]
    : [entry, options];

export const startWorker = (entry: URL, options: Options): Worker => new Worker(...workerArgs(entry, options));
