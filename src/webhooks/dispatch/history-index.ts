// Keeps a delivery-history index (projections/deliveries-index.ts) up to date from the log with a
// projection runner resumed from the index's checkpoint, and prunes it past the retention: the log
// keeps every record, the index only what the deliveries route still shows (and whatever waits).
import { setTimeout as sleep } from 'node:timers/promises';
import { createProjectionRunner, ProjectionReset, type ProjectionRunner } from '../../app/projection-runner.js';
import type { MicrosClock } from '../../log/clock.js';
import type { EventLog } from '../../log/event-log.js';
import { deliveriesNow, deliveryNow, waitingNow } from './delivery-now.js';
import type { DeliveryRecords } from './dispatcher.js';
import type { DeliveryHistory } from './restore.js';
import { DELIVERY_INDEX_TYPES, type DeliveryHistoryReader, type DeliveryIndex, type PendingDeliveries, type WaitingReader } from '../../../projections/deliveries-index.js';

/** Deliveries pruned per transaction, so a prune never holds the index for long. */
const PRUNE_BATCH = 1_000;
/** Pruned at least this often, and twice per retention when that is shorter. */
const PRUNE_EVERY_MS = 60_000;
/** How often a restart waiting for a rebuilt index looks whether it is done (the runner tells no one). */
const REBUILD_POLL_MS = 100;

export interface HistoryIndexer {
  readonly runner: ProjectionRunner;
  /** Resolves once the index has caught up with the log's head (from its checkpoint). */
  start(): Promise<void>;
  /** What a restarting dispatcher takes over: read once the index has applied everything the log has now (rebuilt first if it lost its data). */
  pending(): Promise<PendingDeliveries>;
  /** Prunes everything past the retention now; resolves with how many deliveries went. */
  prune(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A dispatcher's reads of deliveries it does not hold, from the index (and the records after its
 * position), never the whole log nor a subscription's whole stream; `pending` reads what waits once the index has caught up with the log.
 */
export const recordsFromIndex = (log: EventLog, index: DeliveryHistoryReader & WaitingReader, pending: () => Promise<DeliveryHistory>): DeliveryRecords => ({
  async *waiting() {
    for await (const restored of (await pending()).deliveries) if (restored.delivery.status === 'waiting') yield restored;
  },
  current: (subscriptionId, deliveryId) => deliveryNow(index, log, subscriptionId, deliveryId),
  seeds: index,
  lookup: async (subscriptionId) => (deliveryIds) => deliveriesNow(index, log, subscriptionId, deliveryIds),
  waitingPages: (subscriptionId, size) => waitingNow(index, log, subscriptionId, size),
});

export const createHistoryIndexer = (
  log: EventLog,
  index: DeliveryIndex,
  options: { readonly retentionMs: number; readonly clock: MicrosClock },
): HistoryIndexer => {
  const runner = createProjectionRunner(log, {
    name: 'delivery-history',
    types: DELIVERY_INDEX_TYPES,
    async checkpoint() {
      const { position } = await index.checkpoint();
      // Built from another log (this one is shorter): start again. A log reset to the same length or
      // longer is not told apart; deleting the index file is always safe.
      if (position > (await log.headPosition())) {
        console.warn(`delivery history index: its checkpoint ${position} is past the log's head: rebuilding it`);
        await index.clear();
        return 0;
      }
      return position;
    },
    apply: (event) => index.apply(event),
  });
  let timer: NodeJS.Timeout | undefined;
  let pruning: Promise<number> = Promise.resolve(0);

  const pruneAll = async (): Promise<number> => {
    const before = options.clock() - options.retentionMs * 1000;
    let total = 0;
    for (let pruned = PRUNE_BATCH; pruned === PRUNE_BATCH; total += pruned) pruned = await index.prune(before, PRUNE_BATCH);
    return total;
  };
  const prune = (): Promise<number> => (pruning = pruning.catch(() => 0).then(pruneAll));

  return {
    runner,
    async start() {
      await runner.start();
      await runner.waitFor(await log.headPosition());
      timer = setInterval(() => void prune().catch((error: unknown) => console.error('delivery history index: pruning failed:', error)), Math.min(PRUNE_EVERY_MS, options.retentionMs / 2));
      timer.unref();
    },
    async pending() {
      for (;;) {
        await runner.waitFor(await log.headPosition());
        try {
          return await index.pending();
        } catch (error) {
          if (!(error instanceof ProjectionReset)) throw error;
          // A shared index that lost its data (Redis restarted without persistence): rebuilt from the log first.
          runner.resume(error.message);
          while (runner.catchingUp()) await sleep(REBUILD_POLL_MS);
        }
      }
    },
    prune,
    async stop() {
      clearInterval(timer);
      await pruning.catch(() => undefined);
      await runner.stop();
    },
  };
};
