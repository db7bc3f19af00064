// The dispatcher's backlog and its takes, over a real SQLite log with the embedded schedule: an event
// whose fan-out is under way counts as due since its commit (the backpressure and /readyz see a fan-out
// that falls behind), and a fan-out to many subscriptions of one workspace starts as many attempts as
// the workspace has room for, not as many subscriptions as could each take its own limit.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { appendPublicEvent, oneSubscription, recordingDeps, subscriptionsOf } from '../support/dispatcher-fixture.js';

const WORKSPACE = 'w'.repeat(32);

describe('webhook dispatcher: backlog and fan-out takes (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher | null;
  let release: () => void;
  let gate: Promise<void>;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-backlog-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    dispatcher = null;
    gate = new Promise<void>((resolve) => (release = resolve));
  });

  afterEach(async () => {
    release();
    await dispatcher?.stop();
    log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('counts an event whose fan-out is under way as due since its commit, and forgets it once fanned out', async () => {
    const directory = await oneSubscription(log, WORKSPACE, 's'.repeat(32));
    const event = await appendPublicEvent(log, WORKSPACE, 1);
    // The delivery's record waits for the gate: the fan-out stays under way until it opens.
    const held: SqliteEventLog = { ...log, append: async (...args) => (await gate, log.append(...args)) };
    dispatcher = createDispatcher(recordingDeps(held, directory, []));
    dispatcher.start();
    const fanningOut = dispatcher.fanOut(event);
    await eventually('the fan-out under way', async () => (await dispatcher?.backlog())?.oldestDueAt === event.offset);
    release();
    await fanningOut;
    await eventually('nothing due any more', async () => (await dispatcher?.backlog())?.oldestDueAt === null);
  });

  it("starts an attempt of each of ten subscriptions at the fan-out while the workspace has room for them all", async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `s${String(i)}${'s'.repeat(30)}`);
    const directory = await subscriptionsOf(log, WORKSPACE, ids);
    const started: DeliveryRequest[] = [];
    dispatcher = createDispatcher({
      ...recordingDeps(log, directory, []),
      maxInFlight: 16,
      maxInFlightPerSubscription: 4,
      maxInFlightPerWorkspace: 10,
      // Every attempt hangs until the gate opens: only the fan-out's own take starts them.
      sender: { send: async (request: DeliveryRequest) => (started.push(request), await gate, { delivered: true, statusCode: 200, error: null, latencyMs: 1 }), close: async () => undefined } as never,
    });
    dispatcher.start();
    await dispatcher.fanOut(await appendPublicEvent(log, WORKSPACE, 1));
    // Granted its own four up front, each subscription would have held the workspace's room for itself: three started.
    await eventually('ten attempts under way', () => started.length === 10, 2_000);
    expect(new Set(started.map((request) => request.deliveryId)).size).to.equal(10);
  });
});
