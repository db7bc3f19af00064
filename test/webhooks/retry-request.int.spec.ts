// A manual retry recorded by a server without the dispatcher: decided on the delivery as the index
// has it plus the records the index has not applied yet, on a real SQLite log.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { createMemoryDeliveryIndex } from '../../projections/deliveries-index-memory.js';
import type { DeliveryIndex } from '../../projections/deliveries-index.js';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream, recordedEventId } from '../../src/domain/delivery/ids.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { systemMicros } from '../../src/log/clock.js';
import { recordRetryRequest } from '../../src/webhooks/dispatch/history.js';
import type { SubscriptionRow } from '../../src/webhooks/subscriptions.js';

const subscription: SubscriptionRow = {
  id: 's1',
  workspaceId: 'ws',
  url: 'https://example.com/hook',
  events: [],
  isActive: true,
  description: '',
  createdAt: '2026-11-24T00:00:00.000',
  createdPosition: 0,
  consecutiveFailures: 0,
  secrets: { current: 'secret', previous: null },
  sealedSecret: '',
  revision: 0,
};

describe('manual retry request (int)', () => {
  let dir: string;
  let log: EventLog;
  let index: DeliveryIndex;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'retry-request-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    index = createMemoryDeliveryIndex();
  });
  afterEach(async () => {
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Records steps of s1's delivery d1 in the log; `indexed` applies them to the index too. */
  const record = async (steps: { type: string; data: Record<string, unknown> }[], indexed: boolean) => {
    const packed = packSteps(steps as never);
    const { records: [event] } = await log.append(deliveryStream('s1'), [{ id: recordedEventId(steps as never), workspaceId: 'ws', ...packed }], 'any');
    if (indexed && event !== undefined) await index.apply(event);
  };
  const failedDelivery = async () =>
    record(
      [
        { type: 'delivery.scheduled', data: { delivery_id: 'd1', subscription_id: 's1', event_id: 'e1', event_type: 'ticket.created', event_position: 1, fanned_out_through: 0, scheduled_at: 1 } },
        { type: 'delivery.attempted', data: { delivery_id: 'd1', round: 1, attempt: 1, delivered: false, status_code: 500, error: 'http 500', latency_ms: 1, attempted_at: 2, next_attempt_at: null } },
      ],
      true,
    );

  it('records a new round for a failed delivery the index has', async () => {
    await failedDelivery();
    const result = await recordRetryRequest(index, log, systemMicros)(subscription, 'd1');
    expect(result?._tag).to.equal('Right');
    // An event of its own type, which the dispatchers tail without reading back every other record.
    const recorded = (await log.readStream(deliveryStream('s1'))).at(-1);
    expect([recorded?.type, recorded?.data['round'], recorded?.data['delivery_id']]).to.deep.equal(['delivery.retry_requested', 2, 'd1']);
  });

  it('refuses it as waiting when the log has a retry the index has not applied yet', async () => {
    await failedDelivery();
    await record([{ type: 'delivery.retry_requested', data: { delivery_id: 'd1', round: 2, requested_at: 3 } }], false);
    const result = await recordRetryRequest(index, log, systemMicros)(subscription, 'd1');
    expect(result?._tag === 'Left' && result.left).to.include({ code: 'CONFLICT', message: 'Delivery is already waiting for an attempt' });
  });

  it('finds no delivery the index does not have (unknown, or past retention)', async () => {
    await record([{ type: 'delivery.scheduled', data: { delivery_id: 'd1', subscription_id: 's1', event_id: 'e1', event_type: 'ticket.created', event_position: 1, fanned_out_through: 0, scheduled_at: 1 } }], false);
    expect(await recordRetryRequest(index, log, systemMicros)(subscription, 'd1')).to.equal(null);
  });
});
