// Starts a worker thread's TypeScript entry under tsx (npm start, mocha and the scripts run the sources
// with tsx; Node 20 does not apply the parent's --import loader to a worker's entry). Plain JavaScript,
// so Node loads it without a loader; 'tsx/esm/api' resolves from here to the package's ESM API.
import { workerData } from 'node:worker_threads';
import { tsImport } from 'tsx/esm/api';

await tsImport(workerData.entry, import.meta.url);
