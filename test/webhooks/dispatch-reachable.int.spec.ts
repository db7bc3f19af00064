// A dispatcher that a DELETE cannot reach (its presence is not in the Redis the API servers tell it
// through: Redis restarted, its connection not back yet) starts no attempt's look at the log until
// it can be reached again (DispatcherDeps.reachable). A DELETE answered meanwhile waited for no one;
// the look that follows meets its deletion and nothing is sent.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { createDispatcher, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { appendPublicEvent, oneSubscription, recordingDeps } from '../support/dispatcher-fixture.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 's'.repeat(32);

const settle = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('dispatcher: attempts held while a DELETE cannot reach it (int, SQLite)', () => {
  let dir: string;
  let log: SqliteEventLog;
  let dispatcher: Dispatcher;
  const sent: DeliveryRequest[] = [];
  /** Null while reachable; else released by `reach`. */
  let held: Promise<void> | null;
  let reach: () => void;
  let n = 0;

  const publicEvent = (): Promise<RecordedEvent> => appendPublicEvent(log, WORKSPACE, ++n);

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-dispatch-reachable-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    // A directory that has not applied any deletion: only the log tells.
    const directory = await oneSubscription(log, WORKSPACE, SUBSCRIPTION);
    sent.length = 0;
    held = new Promise<void>((resolve) => (reach = () => ((held = null), resolve())));
    dispatcher = createDispatcher({ ...recordingDeps(log, directory, sent), reachable: () => held });
    dispatcher.start();
  });

  afterEach(async () => {
    reach();
    await dispatcher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends nothing while unreachable, then sends once reachable', async () => {
    await dispatcher.fanOut(await publicEvent());
    await settle(200);
    expect(sent, 'sent while unreachable').to.have.length(0);
    reach();
    await settle(200);
    expect(sent).to.have.length(1);
  });

  it('looks at the log only once reachable: a deletion meanwhile sends nothing', async () => {
    await dispatcher.fanOut(await publicEvent());
    await settle(100);
    // The DELETE of a Redis that lost this dispatcher's presence: answered without it.
    await log.deleteStream(subscriptionStream(SUBSCRIPTION));
    reach();
    await settle(200);
    expect(sent, 'sent after the deletion').to.have.length(0);
  });
});
