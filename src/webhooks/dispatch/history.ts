// The delivery routes of servers without a dispatcher (ROLE=api, and the embedded main thread whose
// dispatcher runs in a worker thread): pages of history from the delivery-history index, and a manual
// retry decided on the index and the records since, and recorded in the log as the same step a dispatcher records; the
// dispatchers pick the request up from the log (src/bus/webhook-source.ts).
import * as path from 'node:path';
import { left, right } from 'fp-ts/lib/Either.js';
import { deliveryAggregate } from '../../domain/delivery/delivery.js';
import { deliveryStream, recordedEventId } from '../../domain/delivery/ids.js';
import { domainError } from '../../domain/errors.js';
import { unavailable } from '../../http/api-error.js';
import type { Core } from '../../app/core.js';
import type { MicrosClock } from '../../log/clock.js';
import type { EventLog } from '../../log/event-log.js';
import { mergeRoutes, type WebhookExtension } from '../feature.js';
import type { DeliveryHistoryReader } from '../../../projections/deliveries-index.js';
import { StoreUnavailable } from '../../../projections/tickets-store.js';
import { createMemoryDeliveryIndex } from '../../../projections/deliveries-index-memory.js';
import { openRedisDeliveryIndex } from '../../../projections/deliveries-index-redis.js';
import { DELIVERY_HISTORY_FILE, openSqliteDeliveryHistory } from '../../../projections/deliveries-index-sqlite.js';
import { deliveryNow } from './delivery-now.js';
import { createHistoryIndexer } from './history-index.js';
import { deleteSubscriptionHistory } from './subscription-history.js';
import { replayRoutes } from './replay-routes.js';
import { deliveryRoutes, type RetryDelivery } from './routes.js';

/**
 * A manual retry decided on the delivery as the log has it now: as the index read it, with the
 * records the index had not applied yet folded on top (a few, while it keeps up), never the whole
 * history. A delivery the index no longer has (past retention) is not found. Idempotent by delivery id
 * and round: the step's log event id is derived from them, so a concurrent request for the same
 * round is dropped by the log.
 */
export const recordRetryRequest =
  (history: DeliveryHistoryReader, log: EventLog, clock: MicrosClock): RetryDelivery =>
  async (subscription, deliveryId) => {
    const found = await deliveryNow(history, log, subscription.id, deliveryId);
    if (found === undefined) return null;
    const { delivery } = found;
    const stream = deliveryStream(subscription.id);
    // As the dispatcher: a waiting delivery is refused as such before the subscription's state is looked at.
    if (delivery.status !== 'waiting' && !subscription.isActive) {
      return left(domainError('CONFLICT', 'Webhook is inactive: activate it first', { webhook_id: subscription.id }));
    }
    const result = deliveryAggregate.decide({ kind: 'retry', at: clock() }, delivery);
    if (result._tag === 'Left') return result;
    // Unpacked, each step an event of its own type (DELIVERY_RETRY_REQUESTED), which the dispatchers tail.
    await log.append(stream, result.right.map((step) => ({ id: recordedEventId([step]), type: step.type, workspaceId: subscription.workspaceId, data: step.data })), 'any');
    return right(result.right.reduce(deliveryAggregate.evolve, delivery) ?? delivery);
  };

/** Where a server's delivery routes read the history: a reader, and the work that keeps it current, if this process does that. */
export interface HistorySource {
  readonly reader: DeliveryHistoryReader;
  start?(): Promise<void>;
  stop?(): Promise<void>;
  /** Drops a deleted subscription's history from a shared index (its deletion marker may be gone before a writer reads it). */
  forget?(subscriptionId: string): Promise<void>;
}

/** The embedded role: the index file the dispatcher thread keeps (src/webhooks/dispatch/thread-entry.ts). */
export const historyFromIndexFile = (core: Core): HistorySource => {
  const reader = openSqliteDeliveryHistory({ file: path.join(core.config.dataDir, DELIVERY_HISTORY_FILE) });
  return { reader, stop: () => reader.close() };
};

/**
 * An API server of the distributed mode: an index in memory, built from the log at start and kept
 * current by tailing it (as its memory read models are), pruned past the retention.
 */
export const historyInMemory = (core: Core): HistorySource => {
  const index = createMemoryDeliveryIndex();
  const indexer = createHistoryIndexer(core.log, index, { retentionMs: core.config.webhooks.historyRetentionMs, clock: core.clock });
  return { reader: index, start: indexer.start, stop: indexer.stop };
};

/** A reader whose failures to reach its store answer 503, as the contract has it, rather than 500. */
const answering503 = (reader: DeliveryHistoryReader): DeliveryHistoryReader => {
  const refuse = (error: unknown): never => {
    throw error instanceof StoreUnavailable ? unavailable('The delivery history is unavailable for a moment: retry shortly') : error;
  };
  return {
    page: (query) => reader.page(query).catch(refuse),
    get: (subscriptionId, deliveryId) => reader.get(subscriptionId, deliveryId).catch(refuse),
    replayOutcomes: (subscriptionId, replayId) => reader.replayOutcomes(subscriptionId, replayId).catch(refuse),
    close: () => reader.close(),
  };
};

/**
 * An API server of the distributed mode with REDIS_URL: the index the dispatchers keep in Redis
 * (src/webhooks/dispatch/shared-history.ts), read a page at a time; 503 while Redis cannot be reached.
 */
export const historyInRedis = (core: Core): HistorySource => {
  const index = openRedisDeliveryIndex({ url: core.config.redisUrl as string });
  return { reader: answering503(index), stop: () => index.close(), forget: (subscriptionId) => index.forget(subscriptionId) };
};

/**
 * The delivery routes of the webhooks feature on a server without a dispatcher. A deleted
 * subscription's history goes here too: a dispatcher tailing the log from another connection may
 * miss the deletion marker, which the DELETE removes with the subscription's stream a moment later
 * (its dispatcher deletes the history as well when it sees it; deleting twice is harmless).
 */
export const deliveryHistoryFrom =
  (source: (core: Core) => HistorySource): WebhookExtension =>
  (core, { directory }) => {
    directory.onDeleted((row) => {
      deleteSubscriptionHistory(core.log, row.id).catch((error: unknown) => console.error(`webhook ${row.id}: deleting its delivery history:`, error));
      history.forget?.(row.id).catch((error: unknown) => console.error(`webhook ${row.id}: dropping its delivery history from the index:`, error));
    });
    const history = source(core);
    return {
      routes: mergeRoutes([
        deliveryRoutes({ history: history.reader, subscriptions: directory, retry: recordRetryRequest(history.reader, core.log, core.clock) }),
        replayRoutes(core, { history: history.reader, subscriptions: directory }),
      ]),
      start: history.start,
      stop: history.stop,
    };
  };
