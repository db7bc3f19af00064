// Where replays are read (replay-records.ts) on the real SQLite log: one replay costs its own records,
// never those of its subscription's other replays; the replays still running are found from the
// requests and ends alone; a replay an older release recorded in its subscription's stream is still
// found, driven to its end there by a dispatcher's runner, and deleted with the subscription, as the
// replays of this release are.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { replayDeliveryIdOf } from '../../src/domain/delivery/ids.js';
import { REPLAY_EVENTS, legacyReplayStream, replayAggregate, replayEventId, replayStream, type ReplayCommand } from '../../src/domain/replay/replay.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { findReplay, runningReplays } from '../../src/webhooks/dispatch/replay-records.js';
import { createMemoryReplayLeases } from '../../src/webhooks/dispatch/replay-leases/memory.js';
import { createReplayRunner, type ReplayRunner } from '../../src/webhooks/dispatch/replay-runner.js';
import { deleteSubscriptionHistory } from '../../src/webhooks/dispatch/subscription-history.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { currentReplay, recordingDeps, requestReplay, subscriptionsOf } from '../support/dispatcher-fixture.js';
import { watched } from '../support/delivery-steps.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'u'.repeat(32);
const OTHER = 'o'.repeat(32);
const replayIdOf = (n: number): string => String(n).padStart(32, 'r');

describe('replays read from the log (int, real SQLite log)', function () {
  this.timeout(20_000);
  let dir: string;
  let log: SqliteEventLog;
  /** The log, telling each stream read and the records it returned. */
  let watching: ReturnType<typeof watched>;
  let dispatcher: Dispatcher | undefined;
  let runner: ReplayRunner | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'replay-records-'));
    log = openSqliteLog({ file: join(dir, 'events.sqlite'), durability: 'relaxed' });
    watching = watched(log);
  });
  afterEach(async () => {
    await runner?.stop();
    await dispatcher?.stop();
    runner = undefined;
    dispatcher = undefined;
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Decides and records `commands` of one replay in `stream`, as the API and a driver do. */
  const recordSteps = async (stream: string, commands: readonly ReplayCommand[]): Promise<void> => {
    let state = replayAggregate.initial;
    for (const command of commands) {
      const decided = replayAggregate.decide(command, state);
      if (decided._tag === 'Left') throw new Error(decided.left.message);
      state = decided.right.reduce(replayAggregate.evolve, state);
      await log.append(stream, decided.right.map((step) => ({ id: replayEventId(step), type: step.type, workspaceId: WORKSPACE, data: step.data })), 'any');
    }
  };
  const request = (replayId: string, subscriptionId = SUBSCRIPTION): ReplayCommand => ({ kind: 'request', replayId, subscriptionId, since: 0, until: null, throughPosition: 1, types: [], onlyFailed: false, at: 1 });
  /** A finished replay with `progress` records, in its own stream. */
  const finished = (n: number, progress: number, subscriptionId = SUBSCRIPTION): Promise<void> =>
    recordSteps(replayStream(replayIdOf(n)), [
      request(replayIdOf(n), subscriptionId),
      ...Array.from({ length: progress }, (_, p): ReplayCommand => ({ kind: 'progress', replayId: replayIdOf(n), cursor: p + 1, matched: p })),
      { kind: 'complete', replayId: replayIdOf(n), at: 2 },
    ]);

  it("reads one replay's own records, never its subscription's other replays'", async () => {
    for (let n = 0; n < 20; n++) await finished(n, 50);
    const found = await findReplay(watching.log, SUBSCRIPTION, replayIdOf(7));
    expect(found?.replay).to.include({ id: replayIdOf(7), status: 'completed', cursor: 50 });
    expect(found?.stream).to.equal(replayStream(replayIdOf(7)));
    expect(watching.reads).to.deep.equal([{ stream: replayStream(replayIdOf(7)), fromRevision: 0, records: 52 }]);
  });

  it('finds no replay of another subscription, and none that does not exist', async () => {
    await finished(1, 3, OTHER);
    expect(await findReplay(log, SUBSCRIPTION, replayIdOf(1))).to.equal(undefined);
    expect(await findReplay(log, OTHER, replayIdOf(1))).to.not.equal(undefined);
    expect(await findReplay(log, SUBSCRIPTION, replayIdOf(2))).to.equal(undefined);
  });

  it('finds the replays still running from the requests and ends alone, with where each is recorded', async () => {
    for (let n = 0; n < 5; n++) await finished(n, 10);
    await recordSteps(replayStream(replayIdOf(5)), [request(replayIdOf(5)), { kind: 'progress', replayId: replayIdOf(5), cursor: 9, matched: 9 }]);
    await recordSteps(legacyReplayStream(OTHER), [request(replayIdOf(6), OTHER)]);
    await recordSteps(legacyReplayStream(OTHER), [request(replayIdOf(7), OTHER), { kind: 'cancel', replayId: replayIdOf(7), reason: 'subscription_inactive', at: 3 }]);
    const running = await runningReplays(watching.log);
    expect([...running.entries()].sort()).to.deep.equal([
      [replayIdOf(5), { subscriptionId: SUBSCRIPTION, workspaceId: WORKSPACE, stream: replayStream(replayIdOf(5)) }],
      [replayIdOf(6), { subscriptionId: OTHER, workspaceId: WORKSPACE, stream: legacyReplayStream(OTHER) }],
    ]);
    expect(watching.reads, 'no stream read').to.deep.equal([]);
  });

  it("drives to its end, where it is recorded, a replay an older release recorded in its subscription's stream", async () => {
    const legacy = legacyReplayStream(SUBSCRIPTION);
    // Another replay of the subscription, finished, in the same stream.
    await recordSteps(legacy, [request(replayIdOf(9)), { kind: 'complete', replayId: replayIdOf(9), at: 2 }]);
    await requestReplay(log, WORKSPACE, SUBSCRIPTION, replayIdOf(1), 3, { stream: legacy });
    const sent: DeliveryRequest[] = [];
    const directory = await subscriptionsOf(log, WORKSPACE, [SUBSCRIPTION]);
    dispatcher = createDispatcher(recordingDeps(log, directory, sent));
    dispatcher.start();
    runner = createReplayRunner({ log, subscriptions: directory, dispatcher, leases: createMemoryReplayLeases(), clock: () => Date.now() * 1000, pollMs: 50 });
    await runner.start();
    await eventually('the replay completed', async () => (await currentReplay(log, replayIdOf(1), legacy)).status === 'completed');
    await eventually('its three deliveries sent', () => sent.length === 3);
    const events = await log.readAll({ after: 0, types: ['ticket.created'] });
    expect(sent.map((r) => r.deliveryId).sort()).to.deep.equal(events.map((e) => replayDeliveryIdOf(e.id, SUBSCRIPTION, replayIdOf(1))).sort());
    expect(await log.readStream(replayStream(replayIdOf(1))), 'nothing in a stream of its own').to.deep.equal([]);
    expect((await findReplay(log, SUBSCRIPTION, replayIdOf(1)))?.replay).to.include({ status: 'completed', matched: 3 });
  });

  it("deletes with the subscription every stream of its replays, an older release's included, and no other subscription's", async () => {
    await finished(1, 5);
    await finished(2, 5);
    await finished(3, 5, OTHER);
    await recordSteps(legacyReplayStream(SUBSCRIPTION), [request(replayIdOf(4))]);
    await deleteSubscriptionHistory(log, SUBSCRIPTION);
    for (const stream of [replayStream(replayIdOf(1)), replayStream(replayIdOf(2)), legacyReplayStream(SUBSCRIPTION)]) expect(await log.readStream(stream), stream).to.deep.equal([]);
    expect(await log.readStream(replayStream(replayIdOf(3)))).to.have.length(7);
    expect((await log.readAll({ after: 0, types: [REPLAY_EVENTS.requested] })).map((e) => e.data['replay_id'])).to.deep.equal([replayIdOf(3)]);
  });
});
