// The embedded event source (src/webhooks/dispatch/log-tail.ts) hands the dispatcher its backlog while
// the engine runs: its start, and so the service's, does not wait for a take-over of hundreds of
// thousands of waiting deliveries; it tails the log only once all of it is handed over (the replayed
// fan-out must find what it took over). A real SQLite log and subscription directory; the dispatcher
// records what it is handed, the take-over is let go a delivery at a time.
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { createLogTail, type LogTail } from '../../src/webhooks/dispatch/log-tail.js';
import { TAKE_OVER_RETRY_MS } from '../../src/webhooks/dispatch/take-over.js';
import { openTempLog, type TempLog } from '../support/bus-kafka.js';
import { oneSubscription } from '../support/dispatcher-fixture.js';
import { gatedTakeOver, recordingDispatcher } from '../support/take-over.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'q'.repeat(32);

describe('the embedded log tail takes its backlog over while the engine runs (int)', () => {
  let temp: TempLog;
  let tail: LogTail | null;
  let recorded: ReturnType<typeof recordingDispatcher>;

  const started = async (read: ReturnType<typeof gatedTakeOver>['read']): Promise<LogTail> => {
    const subscriptions = await oneSubscription(temp.log, WORKSPACE, SUBSCRIPTION);
    tail = createLogTail({ log: temp.log, subscriptions, dispatcher: recorded.dispatcher, restore: read });
    await tail.start();
    return tail;
  };

  beforeEach(() => {
    temp = openTempLog();
    recorded = recordingDispatcher();
    tail = null;
  });

  afterEach(async () => {
    await tail?.stop();
    await temp.close();
  });

  it('starts while the take-over waits after its first delivery, and fans out a new event only once all of it is handed over', async () => {
    const takeOver = gatedTakeOver(WORKSPACE, SUBSCRIPTION, 3);
    takeOver.release();
    await started(takeOver.read);
    await eventually('the first delivery taken over', () => recorded.resumed.length === 1);
    const [event] = (await appendEvents(temp.log, WORKSPACE, [ticketUpdated('t1')])) as [RecordedEvent];
    await sleep(500);
    expect(recorded.fannedOut, 'fanned out while the take-over goes on').to.deep.equal([]);
    takeOver.release(2);
    await eventually('the event fanned out once all is taken over', () => recorded.fannedOut.includes(event.id));
    expect(recorded.resumed).to.deep.equal(['d0', 'd1', 'd2']);
  });

  it('reads the take-over again when it fails part way, and a stop ends it at the next delivery and tails nothing', async () => {
    const takeOver = gatedTakeOver(WORKSPACE, SUBSCRIPTION, 4, 2);
    takeOver.release(2);
    await started(takeOver.read);
    takeOver.release();
    // Failed at d2: read again after a pause, from the first.
    await eventually('read again', () => takeOver.reads() === 2, TAKE_OVER_RETRY_MS * 5);
    await eventually('taken over again up to where it is let go', () => recorded.resumed.length === 5);
    expect(recorded.resumed).to.deep.equal(['d0', 'd1', 'd0', 'd1', 'd2']);
    await appendEvents(temp.log, WORKSPACE, [ticketUpdated('t1')]);
    const stopped = tail?.stop();
    tail = null;
    takeOver.release();
    await stopped;
    await sleep(200);
    expect(recorded.resumed, 'nothing after the stop').to.deep.equal(['d0', 'd1', 'd0', 'd1', 'd2']);
    expect(recorded.fannedOut, 'no tail started').to.deep.equal([]);
  });
});
