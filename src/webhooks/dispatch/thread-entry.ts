// The worker thread of src/webhooks/dispatch/thread.ts: the embedded role's webhook delivery engine on
// its own connection to the log (shared mode), fed by a tail of the log that also takes up the manual
// retries the main thread records there. It builds only what the engine needs; its clock is the
// system's. The delivery-history index the main thread's deliveries route reads is kept by a thread of
// its own (index-thread.ts), started first; a restart takes over what the index says waits, reading
// it on this thread's own connection: only the deliveries still waiting, not the history, and says it
// is ready once the index has caught up, the take-over going on while it delivers (log-tail.ts). A
// failure to start ends the thread with the error, which the main thread reports; so does the index
// thread's death.
import * as path from 'node:path';
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import type { IndexedDelivery } from '../../../projections/deliveries-index.js';
import { DELIVERY_HISTORY_FILE, openSqliteDeliveryHistory } from '../../../projections/deliveries-index-sqlite.js';
import { backgroundCore } from '../../app/log-core.js';
import { openDispatcherLog } from '../../bus/role-log.js';
import type { Config } from '../../config/config.js';
import { systemMicros } from '../../log/clock.js';
import { nameThread } from '../../shared/thread-priority.js';
import type { DeliveryEngineStatus } from './backlog.js';
import { pressWhileBehind, sharedDeadline, type DeliverySide } from './backpressure.js';
import type { Dispatcher } from './dispatcher.js';
import { webhooksWithDelivery, type EventSource } from './feature.js';
import { recordsFromIndex } from './history-index.js';
import { startHistoryIndexThread } from './index-thread.js';
import { createLogTail } from './log-tail.js';
import { openParkingLot, PARKING_FILE, PARKING_LIMITS } from './parking.js';
import { withRetryRequests } from './retry-requests.js';
import type { FromWorker, ToWorker } from './thread.js';

const port = parentPort;
if (port === null) throw new Error('thread-entry runs in a worker thread');
const { config, backpressure } = workerData as { config: Config; backpressure: SharedArrayBuffer };
nameThread('webhook-deliver');

// Started first and awaited only where needed: its start (loading its modules, catching the index
// up) overlaps this thread's own.
const indexThread = startHistoryIndexThread(config, (error) => {
  console.error('webhook dispatcher thread: its delivery history index thread died, ending this thread too:', error);
  process.exit(1);
});
// Its failure to start fails this thread's start (awaited there); until then it is not unhandled.
indexThread.catch(() => undefined);
const log = await openDispatcherLog(config, systemMicros);
const index = openSqliteDeliveryHistory({ file: path.join(config.dataDir, DELIVERY_HISTORY_FILE) });
/** Deliveries a restart reads from the index at once. */
const RESTORE_PAGE = 1_000;
/** Resolves once the index has committed everything the log has now. */
const caughtUp = async (): Promise<void> => (await indexThread).appliedThrough(await log.headPosition());
/** What waits, once the index has caught up, read a page at a time as it is iterated. */
const pending = async () => {
  await caughtUp();
  return index.pendingPages(RESTORE_PAGE);
};
// The engine reads subscriptions and reports on them through the command handler only.
const core = backgroundCore(config, log, systemMicros);
// The dispatcher, as the engine hands it to its event source, for the deletions the main thread forwards.
let dispatcher: Dispatcher | null = null;
const source: EventSource = (options) => {
  dispatcher = options.dispatcher;
  // A page at a time: a backlog of millions is never held at once (the dispatcher parks what it need not hold).
  const restore = async () => {
    const { deliveries, fannedOutThrough } = await pending();
    async function* forgettingGone(): AsyncGenerator<IndexedDelivery> {
      // The history of subscriptions deleted while no thread was looking (their marker gone with their stream).
      const gone = new Set<string>();
      for await (const restored of deliveries) {
        if (options.subscriptions.get(restored.workspaceId, restored.delivery.subscriptionId) === undefined) gone.add(restored.delivery.subscriptionId);
        yield restored;
      }
      // Not awaited: the take-over ends with this generator, and the log's tail waits for that (a
      // forget of a long history takes seconds).
      for (const subscriptionId of gone) {
        indexThread.then((thread) => thread.forget(subscriptionId)).catch((error: unknown) => console.error(`webhook ${subscriptionId}: dropping its delivery history from the index:`, error));
      }
    }
    return { deliveries: forgettingGone(), fannedOutThrough };
  };
  return withRetryRequests(createLogTail)({ ...options, restore });
};
// A delivery it does not hold (a manual retry of one settled long ago) is read from the index too.
// Attempts it need not hold wait in the parking lot (parking.ts), taken back as they were parked.
const parking = { lot: openParkingLot(path.join(config.dataDir, PARKING_FILE)), ...PARKING_LIMITS };
const engine = webhooksWithDelivery(source, { records: recordsFromIndex(log, index, pending), parking })(core);
const send = (message: FromWorker): void => port.postMessage(message);
const pong = (id: number, otherHeap = 0, status: DeliveryEngineStatus | null = null): void =>
  send({ kind: 'pong', id, heapUsedBytes: getHeapStatistics().used_heap_size + otherHeap, engine: status });

const started = Promise.all([indexThread, engine.start?.()]);
/** Works for `ms` in slices of 20 ms, yielding between them so that timers and I/O still run (tests). */
const busyFor = (ms: number, until = Date.now() + ms): void => {
  const slice = Math.min(until, Date.now() + 20);
  while (Date.now() < slice) {
    // Busy on purpose.
  }
  if (Date.now() < until) setImmediate(() => busyFor(0, until));
};
/** Asks the main thread to hold writes while deliveries are late and this thread is busy (from ready to stop). */
let pressing: DeliverySide | null = null;
/** The index thread's heap in use as it last answered. */
let indexHeap = 0;
let stopping: Promise<void> | null = null;
port.on('message', (message: ToWorker) => {
  // A ping is answered with both threads' heap in use (the main thread's figures leave out their
  // isolates) and the delivery engine's status (backlog, punctuality). The index thread's heap is
  // the one it last told: a health check must not wait on a thread that runs at a lower priority
  // and may lag on purpose.
  if (message.kind === 'ping') {
    const { id } = message;
    indexThread.then((thread) => thread.heapUsedBytes()).then((bytes) => (indexHeap = bytes), () => undefined);
    return void Promise.resolve(engine.deliveryEngine?.() ?? null).then((status) => pong(id, indexHeap, status), () => undefined);
  }
  if (message.kind === 'deleted') {
    const { subscriptionId } = message;
    // Its attempts in flight are cancelled before its first await: the DELETE may answer now.
    dispatcher?.subscriptionDeleted(subscriptionId).catch((error: unknown) => console.error(`webhook ${subscriptionId}: deleting its delivery history:`, error));
    indexThread.then((thread) => thread.forget(subscriptionId)).catch((error: unknown) => console.error(`webhook ${subscriptionId}: dropping its delivery history from the index:`, error));
    return pong(message.id);
  }
  if (message.kind === 'kill-index') return void indexThread.then((thread) => thread.kill());
  if (message.kind === 'busy') return busyFor(message.ms);
  stopping ??= (async () => {
    await started.catch(() => undefined);
    pressing?.stop();
    await engine.stop?.();
    await (await indexThread).stop();
    await index.close();
    await log.close();
    process.exit(0);
  })();
});
try {
  await started;
} catch (error) {
  await (await indexThread.catch(() => null))?.stop();
  await index.close();
  await log.close();
  throw error;
}
const { lateMs } = config.webhooks.backpressure;
if (lateMs > 0 && stopping === null && engine.deliveryEngine !== undefined) pressing = pressWhileBehind(sharedDeadline(backpressure).press, engine.deliveryEngine, systemMicros, lateMs);
send({ kind: 'ready' });
