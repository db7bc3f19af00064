// The incremental read-back of waiting deliveries a shared retry schedule relies on (dispatch/waiting.ts),
// on the real SQLite log, shared by two writers as the dispatcher processes share it.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Decided } from '../../src/domain/aggregate.js';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createWaitingDeliveries } from '../../src/webhooks/dispatch/waiting.js';

const scheduled = (id: string): Decided => ({
  type: 'delivery.scheduled',
  data: { delivery_id: id, subscription_id: 's', event_id: `e-${id}`, event_type: 'ticket.created', event_position: 1, fanned_out_through: 0, scheduled_at: 10 },
});
const attempted = (id: string, delivered: boolean): Decided => ({
  type: 'delivery.attempted',
  data: { delivery_id: id, round: 1, attempt: 1, delivered, status_code: delivered ? 200 : 500, error: null, latency_ms: 1, attempted_at: 20, next_attempt_at: delivered ? null : 30 },
});

describe('waiting deliveries read back incrementally (real SQLite log)', () => {
  let dir: string;
  let mine: SqliteEventLog;
  let other: SqliteEventLog;
  const append = (log: SqliteEventLog, steps: Decided[]) =>
    log.append(deliveryStream('s'), [{ id: `${Math.random()}`, type: 'delivery.recorded', workspaceId: 'w', data: packSteps(steps).data }], 'any');

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'waiting-'));
    mine = openSqliteLog({ file: join(dir, 'events.sqlite'), shared: true });
    other = openSqliteLog({ file: join(dir, 'events.sqlite'), shared: true });
  });
  afterEach(async () => {
    await Promise.all([mine.close(), other.close()]);
    rmSync(dir, { recursive: true, force: true });
  });

  it('is empty with no workspace for a stream that does not exist', async () => {
    const view = await createWaitingDeliveries(mine).read('s');
    expect([...view.deliveries.keys()]).to.deep.equal([]);
    expect(view.workspaceId).to.equal(null);
  });

  it('follows what any writer appends later, keeping only the deliveries still waiting', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a'), scheduled('b'), scheduled('c')]);
    expect([...(await waiting.read('s')).deliveries.keys()]).to.deep.equal(['a', 'b', 'c']);
    await append(other, [attempted('a', true), attempted('b', false)]);
    const view = await waiting.read('s');
    expect([...view.deliveries.keys()]).to.deep.equal(['b', 'c']);
    expect(view.deliveries.get('b')).to.include({ status: 'waiting', attempt: 1, nextAttemptAt: 30 });
    expect(view.workspaceId).to.equal('w');
  });

  it('gives concurrent readers a view that includes everything appended before they asked', async () => {
    const waiting = createWaitingDeliveries(mine);
    await append(mine, [scheduled('a')]);
    const first = waiting.read('s');
    await append(other, [scheduled('b')]);
    const [, second] = await Promise.all([first, waiting.read('s')]);
    expect([...second.deliveries.keys()]).to.deep.equal(['a', 'b']);
  });
});
