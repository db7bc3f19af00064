// A delivery cancelled because its subscription was deactivated is first recorded as cancelled, then
// taken out of the retry schedule. The other order lost it in a crash between the two: the log still
// said it waited while no schedule entry would ever attempt it, so the backlog reported it later and
// later until a restart took it over. Here the schedule's remove fails as a crash there would stop it.
// Real SQLite log; the directory is a fixed one-subscription view whose row the test deactivates.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { foldDeliveries } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../../src/webhooks/subscriptions.js';
import { oneSubscription, recordingDeps } from '../support/dispatcher-fixture.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'q'.repeat(32);

describe('dispatcher: a delivery cancelled by a deactivation is recorded before it leaves the schedule (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let directory: SubscriptionDirectory;
  let dispatcher: Dispatcher;
  const sent: DeliveryRequest[] = [];
  /** Set: the schedule's remove fails, as a process killed at that step never gets past it. */
  let removeFails = false;
  const removed: string[] = [];

  const deliveries = async () => [...foldDeliveries(await log.readStream(deliveryStream(SUBSCRIPTION))).values()];
  const statuses = async (): Promise<string[]> => (await deliveries()).map((d) => d.status);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-cancel-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    sent.length = 0;
    removed.length = 0;
    removeFails = false;
    const schedule = createMemoryRetrySchedule();
    const deps = recordingDeps(log, directory, sent);
    dispatcher = createDispatcher({
      ...deps,
      // The endpoint fails: the delivery then waits a minute for its retry, held by the dispatcher.
      sender: { send: async (request: DeliveryRequest) => (sent.push(request), { delivered: false, statusCode: 500, error: null, latencyMs: 1 }), close: async () => undefined } as never,
      retryDelaysMs: [60_000],
      schedule: {
        own: {
          ...schedule,
          async remove(deliveryId, round) {
            if (removeFails) throw new Error('killed before the schedule entry was removed');
            removed.push(deliveryId);
            return schedule.remove(deliveryId, round);
          },
        },
      },
    });
    dispatcher.start();
    const { records } = await log.append('ticket-1', [{ id: 'e'.repeat(32), type: 'ticket.created', workspaceId: WORKSPACE, data: { ticket_id: 't1' } }], 'no_stream');
    await dispatcher.fanOut(records[0] as RecordedEvent);
    // Its failed first attempt recorded: the delivery waits for its retry.
    await eventually('the first attempt recorded', async () => (await deliveries()).some((d) => d.status === 'waiting' && d.history.length === 1));
    expect(sent).to.have.length(1);
  });

  afterEach(async () => {
    removeFails = false;
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const deactivate = async (): Promise<void> => {
    (directory.get(WORKSPACE, SUBSCRIPTION) as { isActive: boolean } & SubscriptionRow).isActive = false;
    await dispatcher.subscriptionDeactivated(SUBSCRIPTION, Number.MAX_SAFE_INTEGER);
  };

  it('records the cancellation, then removes the schedule entry', async () => {
    await deactivate();
    expect(await statuses()).to.deep.equal(['cancelled']);
    expect(removed, 'the entry removed').to.have.length(1);
    expect(sent, 'no attempt after the deactivation').to.have.length(1);
  });

  it('leaves the delivery cancelled in the log when the removal never happens', async () => {
    removeFails = true;
    const outcome = await deactivate().then(() => 'done', (error: Error) => error.message);
    expect(outcome).to.equal('killed before the schedule entry was removed');
    // A restart finds nothing waiting: the log says cancelled. The entry left behind, once due, finds
    // no waiting delivery and is dropped (attemptOnce's takeOver).
    expect(await statuses()).to.deep.equal(['cancelled']);
  });
});
