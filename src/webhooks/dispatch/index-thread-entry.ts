// The worker thread of src/webhooks/dispatch/index-thread.ts: keeps a delivery-history index current
// from the log on its own connection, prunes it past the retention, and answers its parent when
// everything up to a position is committed, or with what a restart takes over. The embedded role's
// index is DATA_DIR/delivery-history.sqlite, its parent the delivery thread; a distributed
// dispatcher's is the one index in Redis that every dispatcher keeps (its parent the process's main
// thread, which sends the attempts).
import * as path from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import type { DeliveryIndex } from '../../../projections/deliveries-index.js';
import { openDispatcherLog } from '../../bus/role-log.js';
import type { Config } from '../../config/config.js';
import { systemMicros } from '../../log/clock.js';
import { lowerThreadPriority, nameThread } from '../../shared/thread-priority.js';
import { createHistoryIndexer } from './history-index.js';
import type { FromIndexer, TakenOver, ToIndexer } from './index-thread.js';

const port = parentPort;
if (port === null) throw new Error('index-thread-entry runs in a worker thread');
const { config } = workerData as { config: Config };
// The index may lag behind a burst and catch up after it; the requests and the sends may not: it
// stays ten below API_THREAD_NICE (the request thread's in `npm start`; a dispatcher's main thread
// keeps the process's), as far as nice goes (19).
lowerThreadPriority(Math.min(19, config.apiThreadNice + 10));
nameThread('delivery-index');

interface OpenedIndex {
  readonly index: DeliveryIndex & { close(): Promise<void> };
  /** Makes what was applied visible to the parent's own connection (the SQLite file commits in batches). */
  readonly commit: () => void;
  /** Calls `again` when the store is reachable again after an outage (Redis may come back empty). */
  readonly onReconnect: (again: () => void) => void;
}

/** Only the store this thread keeps is loaded: the embedded thread never loads ioredis. */
const openIndex = async (): Promise<OpenedIndex> => {
  if (config.role === 'dispatcher' && config.redisUrl !== null) {
    const { openRedisDeliveryIndex } = await import('../../../projections/deliveries-index-redis.js');
    const index = openRedisDeliveryIndex({ url: config.redisUrl });
    let connected = false;
    return {
      index,
      commit: () => undefined,
      onReconnect: (again) =>
        index.client.on('ready', () => {
          if (connected) again();
          connected = true;
        }),
    };
  }
  const { DELIVERY_HISTORY_FILE, openSqliteDeliveryIndex } = await import('../../../projections/deliveries-index-sqlite.js');
  const index = openSqliteDeliveryIndex({ file: path.join(config.dataDir, DELIVERY_HISTORY_FILE) });
  return { index, commit: () => index.commit(), onReconnect: () => undefined };
};

const log = await openDispatcherLog(config, systemMicros, 'indexer');
const { index, commit, onReconnect } = await openIndex();
/** Delivery records applied by this thread since it started: what a restart read of the history (logged, and checked by a test). */
let applied = 0;
const counted: DeliveryIndex = {
  ...index,
  apply(event) {
    applied += 1;
    return index.apply(event);
  },
};
const indexer = createHistoryIndexer(log, counted, { retentionMs: config.webhooks.historyRetentionMs, clock: systemMicros });
onReconnect(() => indexer.runner.resume('its store reconnected: reading the checkpoint again'));
const send = (message: FromIndexer): void => port.postMessage(message);
/** Answers request `id` once `work` is done, with what it took over when it read that. */
const answer = (id: number, work: Promise<TakenOver | void>): void => {
  work.then(
    (taken) => send({ kind: 'done', id, heapUsedBytes: getHeapStatistics().used_heap_size, ...(taken === undefined ? {} : { taken }) }),
    (error: unknown) => send({ kind: 'failed', id, message: error instanceof Error ? error.message : String(error) }),
  );
};

let stopping: Promise<void> | null = null;
port.on('message', (message: ToIndexer) => {
  switch (message.kind) {
    case 'sync':
      return answer(message.id, indexer.runner.waitFor(message.position).then(commit));
    case 'pending':
      return answer(message.id, indexer.pending().then((pending) => ({ pending, applied })));
    case 'forget':
      return answer(message.id, index.forget(message.subscriptionId).then(commit));
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
