// A worker for test/shared/thread-launcher.unit.spec.ts, in the place of the embedded service's main
// thread: creates a launcher, lowers its own priority to 12, then starts one worker through the
// launcher and one itself, and says at what nice value each runs.
import { parentPort } from 'node:worker_threads';
import { createThreadLauncher, type LaunchedWorker } from '../../src/shared/thread-launcher.js';
import { lowerThreadPriority } from '../../src/shared/thread-priority.js';
import { startWorker } from '../../src/shared/worker.js';

const WORKER = new URL('./launched-worker.ts', import.meta.url);
const niceOf = (worker: LaunchedWorker) =>
  new Promise<number>((resolve) => {
    worker.on('message', (answer: { nice: number }) => resolve(answer.nice));
    worker.postMessage('nice?');
  });

const launcher = createThreadLauncher();
lowerThreadPriority(12);
const launched = launcher.start(WORKER, { workerData: {}, name: 'launched' });
const direct = startWorker(WORKER, { workerData: {} });
const nices = { launched: await niceOf(launched), direct: await niceOf(direct) };
await Promise.all([launched.terminate(), direct.terminate()]);
await launcher.close();
parentPort?.postMessage(nices);
