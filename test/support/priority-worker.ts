// A worker for test/shared/thread-priority.unit.spec.ts: lowers its own priority and says what its thread's nice value is then.
import { getPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { kernelThreadId, lowerThreadPriority } from '../../src/shared/thread-priority.js';

const took = lowerThreadPriority(7);
parentPort?.postMessage({ took, nice: getPriority(kernelThreadId() ?? 0) });
