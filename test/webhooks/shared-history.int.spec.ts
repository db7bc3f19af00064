// A distributed dispatcher's side of the delivery history in Redis (src/webhooks/dispatch/shared-history.ts):
// its index thread catches the index up from the shared SQLite log and hands the main thread what a
// restart takes over, a page at a time as it is taken (read again should Redis lose the index
// meanwhile); a thread that dies is told to the dispatcher, which ends (here, a spy). Real worker
// thread, real SQLite log in shared mode, a private Redis.
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
import type { RestoredDelivery } from '../../src/webhooks/dispatch/dispatcher.js';
import { sharedHistory, type SharedHistory } from '../../src/webhooks/dispatch/shared-history.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
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

  const decide = (command: DeliveryCommand, state: Parameters<typeof deliveryAggregate.decide>[1]) => {
    const result = deliveryAggregate.decide(command, state);
    if (result._tag === 'Left') throw new Error(result.left.message);
    return result.right;
  };
  /** Delivery d`i`'s steps as a dispatcher records them: scheduled, and delivered at its first attempt (`delivered`), or only that attempt (`later`). */
  const stepsOf = (i: number, delivered: boolean, later = false) => {
    const at = systemMicros();
    const schedule = { kind: 'schedule', deliveryId: `d${i}`, subscriptionId: SUBSCRIPTION, eventId: `x${i}`, eventType: 'ticket.created', eventPosition: i + 1, fannedOutThrough: i, at } as const;
    const scheduled = decide(schedule, null);
    const outcome = { delivered: true, statusCode: 200, error: null, latencyMs: 3 };
    const attempt = decide({ kind: 'record_attempt', attempt: 1, outcome, at: at + 1, retryDelaysMs: [] }, scheduled.reduce(deliveryAggregate.evolve, null));
    return later ? attempt : delivered ? [...scheduled, ...attempt] : scheduled;
  };
  /**
   * Records deliveries d`from`.. up to `count` as a dispatcher does, those below `delivered` delivered
   * at their first attempt (or, `later`, only that attempt of each), `perEvent` deliveries to a record.
   */
  const record = async (count: number, delivered: number, from = 0, { perEvent = 1, later = false } = {}): Promise<void> => {
    for (let i = from; i < count; i += perEvent) {
      const steps = Array.from({ length: Math.min(perEvent, count - i) }, (_, k) => stepsOf(i + k, i + k < delivered, later)).flat();
      await log.append(deliveryStream(SUBSCRIPTION), [{ id: eventId(), workspaceId: WORKSPACE, ...packSteps(steps) }], 'any');
    }
  };

  /** Everything `side` takes over at a restart, as the dispatcher iterates it. */
  const takenOver = async (side: SharedHistory | null): Promise<RestoredDelivery[]> => {
    const taken: RestoredDelivery[] = [];
    for await (const restored of (await side?.restore())?.deliveries ?? []) taken.push(restored);
    return taken;
  };

  it('takes over the waiting deliveries the thread indexed, none of the settled ones', async () => {
    await record(5, 3);
    await history?.feature.start?.();
    const taken = await takenOver(history);
    expect(taken.map(({ delivery }) => delivery.id).sort()).to.deep.equal(['d3', 'd4']);
    expect(taken.every(({ delivery, workspaceId }) => delivery.status === 'waiting' && workspaceId === WORKSPACE)).to.equal(true);
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
      const taken = await takenOver(side);
      const read = /(\d+) delivery records read since start/.exec(lines.join('\n'));
      return { waiting: taken.map(({ delivery }) => delivery.id).sort(), read: Number(read?.[1] ?? NaN) };
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

  /** Resolves once the index in Redis has no waiting delivery of the subscription left. */
  const noneWaiting = async (): Promise<void> => {
    const reader = openRedisDeliveryIndex({ url: redis.url });
    try {
      await reader.checkpoint();
      await eventually('the index applied the attempts', async () => (await reader.appliedOf(SUBSCRIPTION)).waiting === 0);
    } finally {
      await reader.close();
    }
  };

  it('hands what waits over a page at a time, each delivery once, reading no further than the page after the one being taken', async () => {
    await record(8_000, 0, 0, { perEvent: 500 });
    await history?.feature.start?.();
    const whole = await takenOver(history);
    expect(whole.length).to.equal(8_000);
    expect(new Set(whole.map(({ delivery }) => delivery.id)).size, 'each once').to.equal(8_000);
    // Taken one at a time from here: all of them delivered meanwhile by another dispatcher.
    const taking = (await history?.restore())?.deliveries[Symbol.asyncIterator]() as AsyncIterator<RestoredDelivery>;
    expect((await taking.next()).done).to.equal(false);
    await record(8_000, 8_000, 0, { perEvent: 500, later: true });
    await noneWaiting();
    let rest = 0;
    for (let next = await taking.next(); next.done !== true; next = await taking.next()) rest += 1;
    // Read before they were delivered: the page taken, the one after it, and what the index's last script call gave beyond it.
    expect(1 + rest, 'read only as taken').to.be.within(1_000, 3_500);
    // Only the delivery of the event past the fan-out checkpoint, which a restart must know, delivered or not.
    expect((await takenOver(history)).map(({ delivery }) => [delivery.id, delivery.status])).to.deep.equal([['d7999', 'delivered']]);
    expect(deaths).to.deep.equal([]);
  });

  it('lets a read left before its end go, and reads whole again after it', async () => {
    await record(3_000, 1_000, 0, { perEvent: 500 });
    await history?.feature.start?.();
    for await (const restored of (await history?.restore())?.deliveries ?? []) {
      expect(restored.delivery.status).to.equal('waiting');
      break;
    }
    const again = await takenOver(history);
    expect(again.map(({ delivery }) => delivery.id).sort()).to.deep.equal(Array.from({ length: 2_000 }, (_, i) => `d${i + 1_000}`).sort());
    expect(deaths).to.deep.equal([]);
  });

  it('reads again from the start when Redis loses the index during a read: every waiting delivery is handed over', async () => {
    await record(3_000, 0, 0, { perEvent: 500 });
    await history?.feature.start?.();
    const taking = (await history?.restore())?.deliveries[Symbol.asyncIterator]() as AsyncIterator<RestoredDelivery>;
    const ids = new Set<string>();
    const first = await taking.next();
    ids.add((first.value as RestoredDelivery).delivery.id);
    const admin = new Redis(redis.url);
    await admin.flushall();
    admin.disconnect();
    let handed = 1;
    for (let next = await taking.next(); next.done !== true; next = await taking.next()) {
      handed += 1;
      ids.add(next.value.delivery.id);
    }
    expect(ids.size).to.equal(3_000);
    // The third script call of the scan came after the loss: from there the read started again.
    expect(handed, 'some handed over twice').to.be.above(3_000);
    expect(deaths).to.deep.equal([]);
  });

  it('tells the dispatcher when its index thread dies, and answers no more from it', async () => {
    await record(2, 0);
    await history?.feature.start?.();
    await history?.killIndexThread();
    await eventually('the death told', () => deaths.length === 1);
    expect(deaths[0]?.message).to.match(/delivery history index thread exited/);
    let failure: unknown = null;
    await takenOver(history).catch((error: unknown) => (failure = error));
    expect(failure).to.be.instanceOf(Error);
  });
});
