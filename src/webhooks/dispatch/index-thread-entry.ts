// The worker thread of src/webhooks/dispatch/index-thread.ts: keeps the embedded delivery-history index
// (DATA_DIR/delivery-history.sqlite) current from the log on its own connection, prunes it past the
// retention, and answers its parent (the delivery thread) when everything up to a position is
// committed, so that the parent can read what a restart takes over on its own connection.
import * as path from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { DELIVERY_HISTORY_FILE, openSqliteDeliveryIndex } from '../../../projections/deliveries-index-sqlite.js';
import { openDispatcherLog } from '../../bus/role-log.js';
import type { Config } from '../../config/config.js';
import { systemMicros } from '../../log/clock.js';
import { lowerThreadPriority, nameThread } from '../../shared/thread-priority.js';
import { createHistoryIndexer } from './history-index.js';
import type { FromIndexer, ToIndexer } from './index-thread.js';

const port = parentPort;
if (port === null) throw new Error('index-thread-entry runs in a worker thread');
const { config } = workerData as { config: Config };
// The index may lag behind a burst and catch up after it; the requests and the delivery thread may
// not: it stays ten below the request thread (API_THREAD_NICE), as far as nice goes (19).
lowerThreadPriority(Math.min(19, config.apiThreadNice + 10));
nameThread('delivery-index');
const log = await openDispatcherLog(config, systemMicros, 'indexer');
const index = openSqliteDeliveryIndex({ file: path.join(config.dataDir, DELIVERY_HISTORY_FILE) });
const indexer = createHistoryIndexer(log, index, { retentionMs: config.webhooks.historyRetentionMs, clock: systemMicros });
const send = (message: FromIndexer): void => port.postMessage(message);
const answer = (id: number, work: Promise<unknown>): void => {
  work.then(
    () => send({ kind: 'done', id, heapUsedBytes: getHeapStatistics().used_heap_size }),
    (error: unknown) => send({ kind: 'failed', id, message: error instanceof Error ? error.message : String(error) }),
  );
};

let stopping: Promise<void> | null = null;
port.on('message', (message: ToIndexer) => {
  switch (message.kind) {
    case 'sync':
      return answer(message.id, indexer.runner.waitFor(message.position).then(() => index.commit()));
    case 'forget':
      return answer(message.id, index.forget(message.subscriptionId).then(() => index.commit()));
    case 'heap':
      return answer(message.id, Promise.resolve());
    case 'stop':
      stopping ??= (async () => {
        await indexer.stop();
        await index.close();
        await log.close();
        process.exit(0);
      })();
  }
});
try {
  await indexer.start();
} catch (error) {
  await index.close();
  await log.close();
  throw error;
}
send({ kind: 'ready' });
