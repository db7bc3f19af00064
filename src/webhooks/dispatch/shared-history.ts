// The dispatchers' side of the delivery history shared in Redis (the distributed mode with REDIS_URL):
// every dispatcher keeps the one index current from the log (idempotently: its applies are a
// compare-and-set on the index's checkpoint, projections/deliveries-index-redis.ts), restarts from the
// deliveries it says are waiting, re-seeds a lost retry schedule from them, and reads a delivery it
// does not hold from it plus the records after its position. The API servers only read it
// (src/webhooks/dispatch/history.ts).
import type { Core, Feature } from '../../app/core.js';
import type { EventLog } from '../../log/event-log.js';
import type { DeliveryIndex } from '../../../projections/deliveries-index.js';
import { openRedisDeliveryIndex } from '../../../projections/deliveries-index-redis.js';
import type { DeliveryRecords } from './dispatcher.js';
import { createHistoryIndexer, recordsFromIndex, type HistoryIndexer } from './history-index.js';
import type { DeliveryHistory } from './restore.js';

export interface SharedHistory {
  /** Keeps the index current; started before the delivery engine, stopped after it. */
  readonly feature: Feature;
  readonly records: DeliveryRecords;
  /** What a start takes over: the waiting deliveries once the index has caught up with the log. */
  readonly restore: () => Promise<DeliveryHistory>;
}

/** The index's reads for a dispatcher fed by Kafka: an event handed over again finds its deliveries in the index. */
export const recordsForKafka = (log: EventLog, index: DeliveryIndex, indexer: HistoryIndexer): DeliveryRecords => ({
  ...recordsFromIndex(log, index, () => indexer.pending()),
  recorded: (keys) => index.has(keys),
});

export const sharedHistory = (core: Core, url: string): SharedHistory => {
  const index = openRedisDeliveryIndex({ url });
  /** Delivery records applied by this process: what a restart read of the history (logged, and checked by the e2e test). */
  let applied = 0;
  const counted: DeliveryIndex = {
    ...index,
    apply(event) {
      applied += 1;
      return index.apply(event);
    },
  };
  const indexer = createHistoryIndexer(core.log, counted, { retentionMs: core.config.webhooks.historyRetentionMs, clock: core.clock });
  // After an outage the index may be gone (a Redis without persistence): its checkpoint is read again.
  let connected = false;
  index.client.on('ready', () => {
    if (connected) indexer.runner.resume('Redis reconnected: reading the checkpoint again');
    connected = true;
  });
  return {
    feature: {
      name: 'delivery-history',
      start: indexer.start,
      async stop() {
        await indexer.stop();
        await index.close();
      },
    },
    records: recordsForKafka(core.log, index, indexer),
    async restore() {
      const pending = await indexer.pending();
      console.log(`delivery history: ${pending.deliveries.length} deliveries taken over from the index, ${applied} delivery records read since start to catch up with the log`);
      return pending;
    },
  };
};
