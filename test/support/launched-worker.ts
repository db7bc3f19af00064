// A worker for test/shared/thread-launcher.unit.spec.ts: answers each message with its thread id and
// nice value, throws on 'throw', exits with N on 'exit N'.
import { getPriority } from 'node:os';
import { parentPort, threadId } from 'node:worker_threads';
import { kernelThreadId } from '../../src/shared/thread-priority.js';

const tid = kernelThreadId() ?? 0;
parentPort?.on('message', (message: string) => {
  if (message === 'throw') throw new Error('boom in the launched worker');
  if (message.startsWith('exit ')) process.exit(Number(message.slice(5)));
  parentPort?.postMessage({ echo: message, threadId, nice: getPriority(tid) });
});
