// For dispatchers that read what they do not hold from a delivery history index in Redis, as the
// distributed roles do: a private Redis for the describe that calls `indexedDispatch`, and for each of
// its tests a fresh SQLite log with a one-subscription directory, an index on keys of its own kept
// current by its indexer, and shared retry schedules on keys of their own. The dispatchers a test
// registers are stopped after it, then the schedules closed and the index cleared. A test that pauses
// the Redis has it resumed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import type { Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createHistoryIndexer, type HistoryIndexer } from '../../src/webhooks/dispatch/history-index.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import type { DeliveryIndex } from '../../projections/deliveries-index.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { oneSubscription } from './dispatcher-fixture.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from './redis-server.js';

export interface IndexedDispatch {
  redis: PrivateRedis;
  log: SqliteEventLog;
  index: DeliveryIndex;
  indexer: HistoryIndexer;
  directory: SubscriptionDirectory;
  /** Stopped after the test. */
  readonly dispatchers: Dispatcher[];
  /** A retry schedule in the private Redis, on keys of its own, closed after the test. */
  sharedSchedule(): Promise<SharedRetrySchedule>;
}

const keyPrefix = (): string => `test:${Math.random().toString(16).slice(2)}:`;

/** Registers the hooks in the calling describe; the fields are set from its first test's beforeEach on. */
export const indexedDispatch = (workspaceId: string, subscriptionId: string): IndexedDispatch => {
  let dir = '';
  const schedules: SharedRetrySchedule[] = [];
  const world = {
    dispatchers: [] as Dispatcher[],
    async sharedSchedule() {
      const shared = createRedisRetrySchedule({ url: world.redis.url, leaseMs: 10_000, keyPrefix: keyPrefix() });
      schedules.push(shared);
      await shared.ready();
      return shared;
    },
  } as IndexedDispatch;

  before(async function () {
    if (!redisServerInstalled()) this.skip();
    world.redis = await startPrivateRedis();
  });
  after(() => world.redis?.stop());

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-indexed-dispatch-'));
    world.log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    world.directory = await oneSubscription(world.log, workspaceId, subscriptionId);
    world.index = openRedisDeliveryIndex({ url: world.redis.url, keyPrefix: keyPrefix() });
    world.indexer = createHistoryIndexer(world.log, world.index, { retentionMs: 86_400_000, clock: () => Date.now() * 1000 });
    await world.indexer.start();
  });

  afterEach(async () => {
    world.redis.resume();
    for (const dispatcher of world.dispatchers.splice(0)) await dispatcher.stop();
    for (const schedule of schedules.splice(0)) await schedule.close();
    await world.indexer.stop();
    await world.index.clear();
    await world.index.close();
    await world.log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  return world;
};
