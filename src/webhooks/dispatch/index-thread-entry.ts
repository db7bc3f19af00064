// The worker thread of src/webhooks/dispatch/index-thread.ts: keeps a delivery-history index current
// from the log on its own connection, prunes it past the retention, and answers its parent when
// everything up to a position is committed, or with what a restart takes over. The embedded role's
// index is DATA_DIR/delivery-history.sqlite, its parent the delivery thread; a distributed
// dispatcher's is the one index in Redis that the dispatchers share (its parent the process's main
// thread, which sends the attempts): one thread applies the log to it at a time, the one holding its
// lease (projections/deliveries-index-redis.ts, WriterLease), and the others stand by without reading
// the log, seeking the lease every LEASE_EVERY_MS; what they answer, they answer from the index once
// it has caught up with the position asked for. A holder that dies leaves the index unapplied for
// about LEASE_MS; one that stops gives the lease back.
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { getHeapStatistics } from 'node:v8';
import { parentPort, workerData } from 'node:worker_threads';
import { DELIVERY_INDEX_TYPES, type DeliveryIndex, type IndexedDelivery, type PendingPages } from '../../../projections/deliveries-index.js';
import type { WriterLease } from '../../../projections/deliveries-index-redis.js';
import { ProjectionReset } from '../../app/projection-runner.js';
import { openDispatcherLog } from '../../bus/role-log.js';
import type { Config } from '../../config/config.js';
import { systemMicros } from '../../log/clock.js';
import { lowerThreadPriority, nameThread } from '../../shared/thread-priority.js';
import { createHistoryIndexer, type HistoryIndexer } from './history-index.js';
import type { FromIndexer, TakeOverPage, ToIndexer } from './index-thread.js';

const port = parentPort;
if (port === null) throw new Error('index-thread-entry runs in a worker thread');
const { config } = workerData as { config: Config };
// The index may lag behind a burst and catch up after it; the requests and the sends may not: it
// stays ten below API_THREAD_NICE (the request thread's in `npm start`; a dispatcher's main thread
// keeps the process's), as far as nice goes (19).
lowerThreadPriority(Math.min(19, config.apiThreadNice + 10));
nameThread('delivery-index');

/**
 * How long the lease lasts unless renewed, and how often its holder renews it and the others seek it:
 * often, so that a holder's restart (it gives the lease back) leaves the index unapplied a moment
 * only (a look is one short script).
 */
const LEASE_MS = 3_000;
const LEASE_EVERY_MS = 250;
/** How often a standby thread asked for the index at a position looks whether it has caught up. */
const CAUGHT_UP_POLL_MS = 50;

interface OpenedIndex {
  readonly index: DeliveryIndex & { close(): Promise<void> };
  /** A shared index's lease of the one thread that applies; none for an index of this process alone. */
  readonly lease?: WriterLease;
  /** Makes what was applied visible to the parent's own connection (the SQLite file commits in batches). */
  readonly commit: () => void;
  /** Calls `again` when the store is reachable again after an outage (Redis may come back empty). */
  readonly onReconnect: (again: () => void) => void;
}

/** Only the store this thread keeps is loaded: the embedded thread never loads ioredis. */
const openIndex = async (): Promise<OpenedIndex> => {
  if (config.role === 'dispatcher' && config.redisUrl !== null) {
    const [{ openRedisDeliveryIndex }, { redisReady }] = await Promise.all([import('../../../projections/deliveries-index-redis.js'), import('../../shared/redis.js')]);
    const index = openRedisDeliveryIndex({ url: config.redisUrl });
    // The lease is sought at once: a client not yet connected would refuse it (and stand by until the next look).
    await redisReady(index.client);
    // Connected by now: every 'ready' from here on is a reconnection.
    return { index, lease: index, commit: () => undefined, onReconnect: (again) => index.client.on('ready', again) };
  }
  const { DELIVERY_HISTORY_FILE, openSqliteDeliveryIndex } = await import('../../../projections/deliveries-index-sqlite.js');
  const index = openSqliteDeliveryIndex({ file: path.join(config.dataDir, DELIVERY_HISTORY_FILE) });
  return { index, commit: () => index.commit(), onReconnect: () => undefined };
};

const log = await openDispatcherLog(config, systemMicros, 'indexer');
const { index, lease, commit, onReconnect } = await openIndex();
/** Delivery records applied by this thread since it started: what a restart read of the history (logged, and checked by a test). */
let applied = 0;
const counted: DeliveryIndex = {
  ...index,
  apply(event) {
    applied += 1;
    return index.apply(event);
  },
};
const newIndexer = (): HistoryIndexer => createHistoryIndexer(log, counted, { retentionMs: config.webhooks.historyRetentionMs, clock: systemMicros });
/** The indexer applying the log: always, for an index of this process alone; while this thread holds the lease, for a shared one. */
let active: HistoryIndexer | null = null;
onReconnect(() => active?.runner.resume('its store reconnected: reading the checkpoint again'));

/** The index could not be applied: the thread ends, and its dispatcher with it (crash-only, as when the thread dies). */
const fail = (error: unknown): never => {
  console.error('delivery history index: applying the log failed:', error);
  process.exit(1);
};

/** Takes or renews the lease, and starts or stops applying as it says; an unreachable Redis changes nothing. */
const keepLease = async (shared: WriterLease): Promise<void> => {
  let held: boolean;
  try {
    held = await shared.lease(LEASE_MS);
  } catch {
    return;
  }
  if (held && active === null) {
    // Not awaited: the lease is renewed while the index catches up (a rebuild takes longer than the lease).
    active = newIndexer();
    void active.start().catch(fail);
  } else if (!held && active !== null) {
    // Another thread holds it (this one stalled past its deadline): it applies from here on.
    const stopped = active;
    active = null;
    await stopped.stop();
  }
};
/** The look at the lease under way, if any: a look that outlasts the period is not doubled. */
let leasing: Promise<void> | null = null;
let leaseTimer: NodeJS.Timeout | undefined;

/**
 * Resolves once the index has applied the log up to `position`. A shared index is asked, whichever
 * thread applies it (this one may lose the lease meanwhile): caught up when the log has no event of
 * its types between its checkpoint and `position` (the checkpoint is the last one applied, and the
 * events in between may be of other types). A Redis that does not answer is asked again.
 */
const caughtUpTo = async (position: number): Promise<void> => {
  if (lease === undefined) return active?.runner.waitFor(position);
  for (;;) {
    const checkpoint = await lease.appliedThrough().catch(() => null);
    if (checkpoint !== null && checkpoint >= position) return;
    if (checkpoint !== null) {
      const [next] = await log.readAll({ after: checkpoint, types: DELIVERY_INDEX_TYPES, limit: 1 });
      if (next === undefined || next.position > position) return;
    }
    await sleep(CAUGHT_UP_POLL_MS);
  }
};

/** Deliveries handed to the parent at a time, as it takes them. */
const TAKE_OVER_PAGE = 1_000;

/** Binds to the index again once it lost its data: its holder rebuilds it from the log, a standby binds to what is stored now (it applies nothing by it). */
const rebind = async (reset: ProjectionReset): Promise<void> => {
  if (active !== null) active.runner.resume(reset.message);
  else await index.checkpoint();
};

/** What a restart takes over, read once the index has applied everything the log has now. */
const pendingNow = async (): Promise<PendingPages> => {
  for (;;) {
    await caughtUpTo(await log.headPosition());
    try {
      return await index.pendingPages(TAKE_OVER_PAGE);
    } catch (error) {
      if (!(error instanceof ProjectionReset)) throw error;
      await rebind(error);
    }
  }
};

/**
 * `first`'s deliveries in pages of TAKE_OVER_PAGE; read again from the start should the index lose
 * its data meanwhile (what was handed over is handed over again: the parent offers it to the
 * schedule, which takes an offer twice as once).
 */
const takeOverPages = async function* (first: PendingPages): AsyncGenerator<IndexedDelivery[]> {
  for (let source = first; ; source = await pendingNow()) {
    let page: IndexedDelivery[] = [];
    try {
      for await (const delivery of source.deliveries) {
        page.push(delivery);
        if (page.length < TAKE_OVER_PAGE) continue;
        yield page;
        page = [];
      }
    } catch (error) {
      if (!(error instanceof ProjectionReset)) throw error;
      await rebind(error);
      continue;
    }
    if (page.length > 0) yield page;
    return;
  }
};

/** The reads under way, by number: each reads a page when the parent asks for it, and no further. */
const reads = new Map<number, { readonly pages: AsyncIterator<IndexedDelivery[]>; readonly fannedOutThrough: number }>();
let readCount = 0;

const nextPage = async (read: number): Promise<TakeOverPage> => {
  const reading = reads.get(read);
  if (reading === undefined) throw new Error(`no read ${read} under way`);
  const { value, done } = await reading.pages.next();
  if (done === true) reads.delete(read);
  return { read, deliveries: done === true ? [] : value, more: done !== true, fannedOutThrough: reading.fannedOutThrough, applied };
};

const startRead = async (): Promise<TakeOverPage> => {
  const first = await pendingNow();
  const read = ++readCount;
  reads.set(read, { pages: takeOverPages(first), fannedOutThrough: first.fannedOutThrough });
  return nextPage(read);
};

const send = (message: FromIndexer): void => port.postMessage(message);
/** Answers request `id` once `work` is done, with the page it read, if any. */
const answer = (id: number, work: Promise<TakeOverPage | void>): void => {
  work.then(
    (page) => send({ kind: 'done', id, heapUsedBytes: getHeapStatistics().used_heap_size, ...(page === undefined ? {} : { page }) }),
    (error: unknown) => send({ kind: 'failed', id, message: error instanceof Error ? error.message : String(error) }),
  );
};

let stopping: Promise<void> | null = null;
port.on('message', (message: ToIndexer) => {
  switch (message.kind) {
    case 'sync':
      return answer(message.id, caughtUpTo(message.position).then(commit));
    case 'pending':
      return answer(message.id, startRead());
    case 'page':
      return answer(message.id, nextPage(message.read));
    case 'drop': {
      const reading = reads.get(message.read);
      reads.delete(message.read);
      return void reading?.pages.return?.(undefined).catch(() => undefined);
    }
    case 'forget':
      return answer(message.id, index.forget(message.subscriptionId).then(commit));
    case 'heap':
      return answer(message.id, Promise.resolve());
    case 'stop':
      stopping ??= (async () => {
        clearInterval(leaseTimer);
        await leasing;
        await active?.stop();
        // A standby takes over at its next look, not once the lease runs out.
        await lease?.release().catch(() => undefined);
        await index.close();
        await log.close();
        process.exit(0);
      })();
  }
});
try {
  if (lease === undefined) {
    active = newIndexer();
    await active.start();
  } else {
    // Ready at once, holder or not: a holder catches up in the background, and what the parent asks
    // waits for the index to catch up whoever applies it.
    await keepLease(lease);
    leaseTimer = setInterval(() => {
      leasing ??= keepLease(lease)
        .catch(fail)
        .finally(() => (leasing = null));
    }, LEASE_EVERY_MS);
  }
} catch (error) {
  await index.close();
  await log.close();
  throw error;
}
send({ kind: 'ready' });
