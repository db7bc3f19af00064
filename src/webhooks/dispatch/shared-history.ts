// The dispatchers' side of the delivery history shared in Redis (the distributed mode with REDIS_URL):
// the dispatchers keep the one index current from the log, one at a time (the one whose index thread
// holds its lease; the others stand by and take over when it stops or dies), idempotently (its applies
// are a compare-and-set on the index's checkpoint, projections/deliveries-index-redis.ts), in a worker
// thread of its own (src/webhooks/dispatch/index-thread.ts), so that reading the records back and
// writing them to Redis never holds up the sends on the main thread. The main thread restarts from the
// deliveries the index says are waiting, re-seeds a lost retry schedule from them, and reads a delivery
// it does not hold from it plus the records after its position, on a connection of its own. The API
// servers only read it (src/webhooks/dispatch/history.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Core, Feature } from '../../app/core.js';
import type { EventLog } from '../../log/event-log.js';
import type { DeliveryHistoryReader, DeliveryIndex, IndexedDelivery, PendingPages, WaitingReader } from '../../../projections/deliveries-index.js';
import { openRedisDeliveryIndex } from '../../../projections/deliveries-index-redis.js';
import type { DeliveryRecords } from './dispatcher.js';
import { recordsFromIndex } from './history-index.js';
import type { DeliveryHistory } from './restore.js';
import { startHistoryIndexThread, type HistoryIndexThread } from './index-thread.js';

export interface SharedHistory {
  /** Keeps the index current; started before the delivery engine, stopped after it. */
  readonly feature: Feature;
  readonly records: DeliveryRecords;
  /** What a start takes over: the waiting deliveries once the index has caught up with the log, handed over a page at a time as they are taken. */
  readonly restore: () => Promise<PendingPages>;
  /** Resolves once the index has applied every delivery record the log holds now, whichever dispatcher applied it. */
  readonly caughtUp: () => Promise<void>;
  /** Ends the index thread abruptly, as a crash would (tests). */
  killIndexThread(): Promise<void>;
}

/** Crash-only, as the embedded delivery thread does: the dispatcher's partitions go to the other dispatchers. */
const endProcess = (error: Error): void => {
  console.error('dispatcher: its delivery history index thread died, ending the process:', error);
  process.exit(1);
};

/** The index's reads for a dispatcher fed by Kafka: an event handed over again finds its deliveries in the index. */
export const recordsForKafka = (log: EventLog, index: DeliveryHistoryReader & WaitingReader & Pick<DeliveryIndex, 'has'>, pending: () => Promise<DeliveryHistory>): DeliveryRecords => ({
  ...recordsFromIndex(log, index, pending),
  recorded: (keys) => index.has(keys),
});

/** How long a metrics scrape waits for the index thread's heap: it runs at a lower priority and may lag on purpose. */
const HEAP_ANSWER_MS = 1_000;

/** `died` hears of an index thread that ended other than by `stop` (by default the process ends). */
export const sharedHistory = (core: Core, url: string, died: (error: Error) => void = endProcess): SharedHistory => {
  const index = openRedisDeliveryIndex({ url });
  let thread: HistoryIndexThread | null = null;
  const indexThread = (): HistoryIndexThread => {
    if (thread === null) throw new Error('delivery history: its index thread is not started');
    return thread;
  };
  return {
    feature: {
      name: 'delivery-history',
      workers: [
        {
          thread: 'webhook-history-index',
          usedBytes: async () =>
            thread === null ? null : Promise.race([thread.heapUsedBytes(), sleep(HEAP_ANSWER_MS, null, { ref: false })]).catch(() => null),
        },
      ],
      async start() {
        thread = await startHistoryIndexThread(core.config, died);
      },
      async stop() {
        await thread?.stop();
        thread = null;
        await index.close();
      },
    },
    records: recordsForKafka(core.log, index, () => indexThread().pending()),
    async restore() {
      const { deliveries, fannedOutThrough, applied } = await indexThread().pending();
      async function* counted(): AsyncGenerator<IndexedDelivery> {
        let taken = 0;
        for await (const delivery of deliveries) {
          taken += 1;
          yield delivery;
        }
        console.log(`delivery history: ${taken} deliveries taken over from the index, ${applied} delivery records read since start to catch up with the log`);
      }
      return { deliveries: counted(), fannedOutThrough };
    },
    caughtUp: async () => indexThread().appliedThrough(await core.log.headPosition()),
    killIndexThread: () => indexThread().kill(),
  };
};
