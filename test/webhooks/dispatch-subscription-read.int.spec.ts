// Before each attempt the dispatcher looks at the subscription's stream for what its directory has not
// applied yet (a deletion, a rotation). That stream grows with every failure counted, so the look reads
// from the revision the directory's row is as of: one event while the directory is current, not the
// whole history; and when the log has more, the attempt waits for the directory to apply it. The
// attempts the pump starts in one turn of the event loop share one look; a later turn looks again.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { sharedPerTurn } from '../../src/webhooks/dispatch/subscription-logged.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../../src/webhooks/subscriptions.js';
import { appendPublicEvent, recordingDeps } from '../support/dispatcher-fixture.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);
const FAILURES = 300;

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('dispatcher: what an attempt reads of its subscription (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher;
  const sent: DeliveryRequest[] = [];
  /** Events each read of the subscription's stream returned. */
  const reads: number[] = [];
  const waitedFor: number[] = [];
  let row: SubscriptionRow;
  let n = 0;

  const publicEvent = (): Promise<RecordedEvent> => appendPublicEvent(log, WORKSPACE, ++n);
  const subscriptionEvent = (type: string, i: number) => ({ id: `${'f'.repeat(28)}${String(i).padStart(4, '0')}`, type, workspaceId: WORKSPACE, data: { delivery_id: `d${i}`, round: 1, consecutive_failures: 1 } });

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-read-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    // A subscription whose endpoint failed often: its stream is the creation and 300 counted failures.
    const created = await log.append(subscriptionStream(SUBSCRIPTION), [{ id: 'c'.repeat(32), type: SUBSCRIPTION_EVENTS.created, workspaceId: WORKSPACE, data: {} }], 'no_stream');
    const failures = await log.append(subscriptionStream(SUBSCRIPTION), Array.from({ length: FAILURES }, (_, i) => subscriptionEvent(SUBSCRIPTION_EVENTS.failureCounted, i)), 'any');
    row = {
      id: SUBSCRIPTION,
      workspaceId: WORKSPACE,
      url: 'http://127.0.0.1:9/hook',
      events: [],
      isActive: true,
      description: '',
      createdAt: new Date().toISOString(),
      createdPosition: (created.records[0] as RecordedEvent).position,
      consecutiveFailures: 0,
      secrets: { current: 'whsec_test', previous: null },
      sealedSecret: '',
      revision: failures.nextRevision,
    };
    const directory: SubscriptionDirectory = {
      get: (ws, id) => (ws === WORKSPACE && id === SUBSCRIPTION ? row : undefined),
      workspaceOf: (id) => (id === SUBSCRIPTION ? WORKSPACE : undefined),
      matching: (ws) => (ws === WORKSPACE ? [row] : []),
      list: (ws) => (ws === WORKSPACE ? [row] : []),
      waitFor: async (position) => void waitedFor.push(position),
    } as SubscriptionDirectory;
    const readStream = log.readStream.bind(log);
    log.readStream = async (stream, from) => {
      const events = await readStream(stream, from);
      if (stream === subscriptionStream(SUBSCRIPTION)) reads.push(events.length);
      return events;
    };
    sent.length = 0;
    reads.length = 0;
    waitedFor.length = 0;
    dispatcher = createDispatcher(recordingDeps(log, directory, sent));
    dispatcher.start();
  });

  afterEach(async () => {
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("reads one event, the row's own, while the directory is current", async () => {
    for (let i = 0; i < 3; i++) await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent).to.have.length(3);
    expect(reads).to.deep.equal([1, 1, 1]);
    expect(waitedFor).to.deep.equal([]);
  });

  it('waits for the directory to apply what the log has beyond its row, then sends', async () => {
    const { records } = await log.append(subscriptionStream(SUBSCRIPTION), [subscriptionEvent(SUBSCRIPTION_EVENTS.failuresReset, FAILURES)], 'any');
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(reads).to.deep.equal([2]);
    expect(waitedFor).to.deep.equal([(records[0] as RecordedEvent).position]);
    expect(sent).to.have.length(1);
  });

  it("sends nothing when the row's own event is gone (the stream was deleted and the directory missed it)", async () => {
    await log.deleteStream(subscriptionStream(SUBSCRIPTION));
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent).to.have.length(0);
  });

  it('attempts started in one turn share one read: a burst of 8 deliveries reads the stream less often than it sends', async () => {
    const events = [];
    for (let i = 0; i < 8; i++) events.push(await publicEvent());
    await Promise.all(events.map((event) => dispatcher.fanOut(event)));
    await settle(300);
    expect(sent).to.have.length(8);
    // The pump starts them in a turn or two (each turn's look is shared); one look each would be 8 reads.
    expect(reads).to.have.length.below(8);
    expect(reads.every((count) => count === 1)).to.equal(true);
  });

  it('sharedPerTurn: one read per row and turn; the next turn reads again, a row of another revision apart', async () => {
    const look = sharedPerTurn(log, 1_000);
    const [a, b] = [look(row), look(row)];
    expect(a).to.equal(b);
    expect((await a).logged).to.deep.equal({ newerThrough: null });
    expect(reads).to.deep.equal([1]);
    await look({ ...row, revision: row.revision - 1 });
    expect(reads, 'a row of another revision').to.deep.equal([1, 2]);
    // The delete commits in a later turn (group commit), so this look is the next turn's.
    await log.deleteStream(subscriptionStream(SUBSCRIPTION));
    expect((await look(row)).logged, 'the next turn').to.equal('gone');
    expect(reads).to.deep.equal([1, 2, 0]);
  });

  it('sharedPerTurn: a turn that outlasts the age a look may have reads again (a stalled thread)', async () => {
    const look = sharedPerTurn(log, 50);
    const first = look(row);
    const until = performance.now() + 80;
    while (performance.now() < until);
    const second = look(row);
    expect(second).to.not.equal(first);
    expect((await second).at).to.be.greaterThan((await first).at);
    expect(reads).to.deep.equal([1, 1]);
  });

  it('a look is not kept past its turn: a deletion after one attempt stops the next', async () => {
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent).to.have.length(1);
    await log.deleteStream(subscriptionStream(SUBSCRIPTION));
    await dispatcher.fanOut(await publicEvent());
    await settle(300);
    expect(sent, 'nothing sent after the deletion').to.have.length(1);
    expect(reads).to.deep.equal([1, 0]);
  });
});
