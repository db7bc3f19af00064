// Two dispatchers sharing a retry schedule in Redis and one SQLite log, in this process: a dispatcher
// that claims back the retry it put attempts it from what it kept (own-puts.ts), and any other claim
// reads the delivery from the log, so a dispatcher's death or another's attempt meanwhile never makes
// an attempt go out twice. The clock is the dispatchers' own, moved past each retry's due time by the
// test, so no retry falls due while the test is setting the next step up. Pending unless REDIS_URL.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory } from '../../src/webhooks/subscriptions.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { oneSubscription, recordingDeps } from '../support/dispatcher-fixture.js';

const redisUrl = process.env['REDIS_URL'];
const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);
const RETRY_DELAY_MS = 60_000;

(redisUrl ? describe : describe.skip)('dispatchers sharing a retry schedule: retries claimed back from memory (int, Redis, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let schedules: SharedRetrySchedule[];
  let offsetMs: number;
  /** What each dispatcher sent: attempt numbers of the one delivery. */
  let sent: { a: number[]; b: number[] };
  let a: Dispatcher;
  let b: Dispatcher;
  /** The attempt from which the receiver answers 200. */
  let succeedsAt: number;

  const dispatcher = async (name: 'a' | 'b', directory: SubscriptionDirectory): Promise<Dispatcher> => {
    const schedule = createRedisRetrySchedule({ url: redisUrl as string, leaseMs: 3 * RETRY_DELAY_MS, keyPrefix: `test:${path.basename(dir)}:` });
    await schedule.ready();
    schedules.push(schedule);
    return createDispatcher({
      ...recordingDeps(log, directory, []),
      schedule: { shared: schedule },
      clock: () => (Date.now() + offsetMs) * 1000,
      retryDelaysMs: [RETRY_DELAY_MS, RETRY_DELAY_MS, RETRY_DELAY_MS],
      sender: {
        send: async (request: DeliveryRequest) => {
          sent[name].push(request.attempt);
          const delivered = request.attempt >= succeedsAt;
          return { delivered, statusCode: delivered ? 200 : 500, error: delivered ? null : 'HTTP 500', latencyMs: 1 };
        },
        close: async () => undefined,
      } as never,
    });
  };

  /** Resolves once the delivery's next attempt is in the schedule, claimed by nobody. */
  const retryScheduled = () =>
    eventually('the retry put', async () => (await schedules[0]!.size()) === 1 && ((await schedules[0]!.nextDueAt()) ?? 0) > (Date.now() + offsetMs) * 1000, 5000);

  /** Moves the dispatchers' clock past the retry's due time. */
  const retryDue = () => void (offsetMs += RETRY_DELAY_MS + 1000);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-own-puts-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    schedules = [];
    offsetMs = 0;
    sent = { a: [], b: [] };
    succeedsAt = 2;
    const directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    a = await dispatcher('a', directory);
    b = await dispatcher('b', directory);
    const { records } = await log.append('ticket-1', [{ id: 'e'.repeat(32), type: 'ticket.created', workspaceId: WORKSPACE, data: { ticket_id: 't1' } }], 'no_stream');
    const event = records[0] as RecordedEvent;
    // A fans the event out: the first attempt (its own put) fails and A puts the retry.
    await a.fanOut(event);
    await eventually('the first attempt', () => sent.a.length === 1, 5000);
    await retryScheduled();
  });

  afterEach(async () => {
    await Promise.all([a.stop(), b.stop()]);
    await Promise.all(schedules.map((s) => s.close()));
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the retry it put from what it kept: the delivery and its body are not read back from the log', async () => {
    let reads = 0;
    const { readStream, readAll } = log;
    log.readStream = async (stream, from) => (stream === deliveryStream(SUBSCRIPTION) && reads++, readStream.call(log, stream, from));
    log.readAll = async (query) => (reads++, readAll.call(log, query));
    retryDue();
    a.start();
    await eventually('the retry', () => sent.a.length === 2, 5000);
    expect(sent.a).to.deep.equal([1, 2]);
    expect(reads).to.equal(0);
  });

  it('has the retry sent by the other dispatcher, from the log, when the one that put it dies', async () => {
    await a.stop();
    retryDue();
    b.start();
    await eventually('the retry', () => sent.b.length === 1, 5000);
    expect(sent).to.deep.equal({ a: [1], b: [2] });
  });

  it('reads the log, not what it kept, once another dispatcher attempted the delivery: no attempt number goes out twice', async () => {
    succeedsAt = 3;
    retryDue();
    b.start();
    await eventually('the second attempt, by B', () => sent.b.length === 1, 5000);
    await retryScheduled();
    await b.stop();
    retryDue();
    a.start();
    await eventually('the third attempt, by A', () => sent.a.length === 2, 5000);
    expect(sent).to.deep.equal({ a: [1, 3], b: [2] });
  });
});
