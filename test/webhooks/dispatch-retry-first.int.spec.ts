// A retry falls due at the next_attempt_at the API shows. When its subscription's sending slots are
// busy with a backlog of first attempts (all due before it), the retry goes out as the next slot frees,
// not behind that backlog.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { oneSubscription, recordingDeps } from '../support/dispatcher-fixture.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);
const BACKLOG = 30;
/** Each successful request takes this long: the backlog holds the one slot for BACKLOG × this. */
const RECEIVER_MS = 20;
const RETRY_DELAY_MS = 100;

describe('dispatcher: a due retry before a backlog of first attempts (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher;
  const sent: { deliveryId: string; attempt: number; at: number }[] = [];

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-retry-first-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    sent.length = 0;
  });

  afterEach(async () => {
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the retry as the next slot frees, ahead of first attempts due before it', async () => {
    const directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    let failedOnce = false;
    dispatcher = createDispatcher({
      ...recordingDeps(log, directory, []),
      sender: {
        send: async (request: DeliveryRequest) => {
          sent.push({ deliveryId: request.deliveryId, attempt: request.attempt, at: performance.now() });
          if (!failedOnce) {
            failedOnce = true;
            return { delivered: false, statusCode: 500, error: null, latencyMs: 1 };
          }
          await new Promise((resolve) => setTimeout(resolve, RECEIVER_MS));
          return { delivered: true, statusCode: 200, error: null, latencyMs: RECEIVER_MS };
        },
        close: async () => undefined,
      } as never,
      retryDelaysMs: [RETRY_DELAY_MS],
      maxInFlightPerSubscription: 1,
    });
    dispatcher.start();
    const event = async (n: number): Promise<RecordedEvent> => {
      const { records } = await log.append(`ticket-${n}`, [{ id: `${'e'.repeat(30)}${String(n).padStart(2, '0')}`, type: 'ticket.created', workspaceId: WORKSPACE, data: { ticket_id: `t${n}` } }], 'no_stream');
      return records[0] as RecordedEvent;
    };
    // Appended before the failure (an append waits for its fsync): fanned out right after it, the
    // whole backlog falls due well before the retry, however slow the machine's disk is.
    const failing = await event(0);
    const backlog: RecordedEvent[] = [];
    for (let n = 1; n <= BACKLOG; n++) backlog.push(await event(n));
    await dispatcher.fanOut(failing);
    await eventually('the first attempt failed', () => sent.length === 1);
    await Promise.all(backlog.map((e) => dispatcher.fanOut(e)));
    await eventually('everything sent', () => sent.length === BACKLOG + 2, 10_000);
    const first = sent[0] as (typeof sent)[number];
    const retry = sent.findIndex((s) => s.deliveryId === first.deliveryId && s.attempt === 2);
    // Due 100 ms after the failure, with 20 ms requests: after about five of the backlog, not all thirty
    // (on a machine too busy to send one in 100 ms, it may even go first).
    expect(retry, 'the retry went out behind the backlog').to.be.within(1, BACKLOG / 2);
    expect((sent[retry] as (typeof sent)[number]).at - first.at).to.be.at.least(RETRY_DELAY_MS);
  });
});
