// A distributed dispatcher's side of the delivery history in Redis (src/webhooks/dispatch/shared-history.ts):
// its index thread catches the index up from the shared SQLite log and hands the main thread what a
// restart takes over; a thread that dies is told to the dispatcher, which ends (here, a spy). Real
// worker thread, real SQLite log in shared mode, a private Redis.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { backgroundCore } from '../../src/app/log-core.js';
import { loadConfig } from '../../src/config/config.js';
import { deliveryAggregate, packSteps, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { systemMicros } from '../../src/log/clock.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { eventId } from '../../src/shared/ids.js';
import { sharedHistory, type SharedHistory } from '../../src/webhooks/dispatch/shared-history.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../support/redis-server.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);

describe("a dispatcher's delivery history index thread over Redis (int)", function () {
  this.timeout(60_000);
  let redis: PrivateRedis;
  let dir: string;
  let log: SqliteEventLog;
  let history: SharedHistory | null;
  let deaths: Error[];

  before(async function () {
    if (!redisServerInstalled()) this.skip();
    redis = await startPrivateRedis();
  });
  after(() => redis?.stop());

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-shared-history-'));
    // The dispatcher's thread opens the same file, as its own connection.
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite'), shared: true });
    deaths = [];
    const config = loadConfig({ ROLE: 'dispatcher', DATA_DIR: dir, REDIS_URL: redis.url, KAFKA_BROKERS: '127.0.0.1:9' });
    history = sharedHistory(backgroundCore(config, log, systemMicros), redis.url, (error) => deaths.push(error));
  });

  afterEach(async () => {
    await history?.feature.stop?.();
    await log.close();
    // The thread's index has no namespace of its own: the next case starts from an empty Redis.
    const admin = new Redis(redis.url);
    await admin.flushall();
    admin.disconnect();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Records deliveries d`from`.. up to `count` as a dispatcher does, those below `delivered` delivered at their first attempt. */
  const record = async (count: number, delivered: number, from = 0): Promise<void> => {
    for (let i = from; i < count; i++) {
      const decide = (command: DeliveryCommand, state: Parameters<typeof deliveryAggregate.decide>[1]) => {
        const result = deliveryAggregate.decide(command, state);
        if (result._tag === 'Left') throw new Error(result.left.message);
        return result.right;
      };
      const at = systemMicros();
      const schedule = { kind: 'schedule', deliveryId: `d${i}`, subscriptionId: SUBSCRIPTION, eventId: `x${i}`, eventType: 'ticket.created', eventPosition: i + 1, fannedOutThrough: i, at } as const;
      const scheduled = decide(schedule, null);
      const outcome = { delivered: true, statusCode: 200, error: null, latencyMs: 3 };
      const steps = i < delivered ? [...scheduled, ...decide({ kind: 'record_attempt', attempt: 1, outcome, at: at + 1, retryDelaysMs: [] }, scheduled.reduce(deliveryAggregate.evolve, null))] : scheduled;
      await log.append(deliveryStream(SUBSCRIPTION), [{ id: eventId(), workspaceId: WORKSPACE, ...packSteps(steps) }], 'any');
    }
  };

  it('takes over the waiting deliveries the thread indexed, none of the settled ones', async () => {
    await record(5, 3);
    await history?.feature.start?.();
    const taken = await history?.restore();
    expect(taken?.deliveries.map(({ delivery }) => delivery.id).sort()).to.deep.equal(['d3', 'd4']);
    expect(taken?.deliveries.every(({ delivery, workspaceId }) => delivery.status === 'waiting' && workspaceId === WORKSPACE)).to.equal(true);
    // What the main thread reads on its own connection, from what the thread wrote.
    const recorded = await history?.records.recorded?.([{ subscriptionId: SUBSCRIPTION, deliveryId: 'd0' }, { subscriptionId: SUBSCRIPTION, deliveryId: 'd9' }]);
    expect(recorded).to.deep.equal([true, false]);
    expect(deaths).to.deep.equal([]);
  });

  /** Another dispatcher's side over the same log and Redis, stopped after the case. */
  const another = (): SharedHistory => {
    const config = loadConfig({ ROLE: 'dispatcher', DATA_DIR: dir, REDIS_URL: redis.url, KAFKA_BROKERS: '127.0.0.1:9' });
    const other = sharedHistory(backgroundCore(config, log, systemMicros), redis.url, (error) => deaths.push(error));
    others.push(other);
    return other;
  };
  let others: SharedHistory[] = [];
  afterEach(async () => {
    for (const other of others.splice(0)) await other.feature.stop?.();
  });

  /** What `side` takes over, and how many delivery records its thread read to get there (from its log line). */
  const restoreOf = async (side: SharedHistory | null): Promise<{ readonly waiting: string[]; readonly read: number }> => {
    const lines: string[] = [];
    const log = console.log;
    console.log = (...args: unknown[]) => void lines.push(args.join(' '));
    try {
      const taken = await side?.restore();
      const read = /(\d+) delivery records read since start/.exec(lines.join('\n'));
      return { waiting: (taken?.deliveries ?? []).map(({ delivery }) => delivery.id).sort(), read: Number(read?.[1] ?? NaN) };
    } finally {
      console.log = log;
    }
  };

  it('has one thread apply the log at a time: the other stands by, reads none of it, and answers from what the first applied', async () => {
    await record(5, 3);
    await history?.feature.start?.();
    const standby = another();
    await standby.feature.start?.();
    expect(await restoreOf(history)).to.deep.equal({ waiting: ['d3', 'd4'], read: 5 });
    expect(await restoreOf(standby)).to.deep.equal({ waiting: ['d3', 'd4'], read: 0 });
    // Recorded later: the standby waits for the holder to apply it, and reads none of it itself.
    await record(8, 3, 5);
    // The log's head is an event the index does not apply: caught up all the same.
    await log.append('ticket-t1', [{ id: eventId(), type: 'ticket.created', workspaceId: WORKSPACE, data: { id: 't1' } }], 'no_stream');
    expect(await restoreOf(standby)).to.deep.equal({ waiting: ['d3', 'd4', 'd5', 'd6', 'd7'], read: 0 });
    expect(deaths).to.deep.equal([]);
  });

  it('has a standby take the index over once the thread applying it stopped, or died', async () => {
    await record(2, 0);
    await history?.feature.start?.();
    const standby = another();
    await standby.feature.start?.();
    // Stopped: it gave the lease back, and the standby applies from its next look (within 250 ms).
    await history?.feature.stop?.();
    history = null;
    await record(4, 0, 2);
    const took = await restoreOf(standby);
    expect(took.waiting).to.deep.equal(['d0', 'd1', 'd2', 'd3']);
    expect(took.read, 'the records after the stop, applied by the standby').to.equal(2);
    // Died: its lease runs out (3 s), then the last one standing applies.
    const third = another();
    await third.feature.start?.();
    await standby.killIndexThread();
    const started = Date.now();
    await record(6, 0, 4);
    const after = await restoreOf(third);
    expect(after.waiting).to.deep.equal(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(after.read).to.equal(2);
    expect(Date.now() - started, 'taken over once the lease ran out').to.be.below(10_000);
  });

  it('tells the dispatcher when its index thread dies, and answers no more from it', async () => {
    await record(2, 0);
    await history?.feature.start?.();
    await history?.killIndexThread();
    await eventually('the death told', () => deaths.length === 1);
    expect(deaths[0]?.message).to.match(/delivery history index thread exited/);
    let failure: unknown = null;
    await history?.restore().catch((error: unknown) => (failure = error));
    expect(failure).to.be.instanceOf(Error);
  });
});
