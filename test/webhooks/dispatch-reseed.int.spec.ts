// A dispatcher whose shared retry schedule was lost (Redis restarted without persistence) offers every
// waiting delivery again, a batch at a time as it reads them: a backlog of hundreds of thousands is
// never read whole before the first offer, nor offered one call at a time. Real Redis (a private
// server) for the schedule; the waiting deliveries from a source that counts what was read of it.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { Delivery } from '../../src/domain/delivery/delivery.js';
import { createDispatcher, type DeliveryRecords, type RestoredDelivery } from '../../src/webhooks/dispatch/dispatcher.js';
import type { DueAttempt, SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import { recordingDeps } from '../support/dispatcher-fixture.js';
import { deliverySteps } from '../support/delivery-steps.js';
import { indexedDispatch } from '../support/indexed-dispatch.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'r'.repeat(32);
/** More than two batches of offers (PARKING_BATCH, 1,000). */
const WAITING = 2_500;

describe('a dispatcher re-seeding a lost shared schedule (int)', function () {
  this.timeout(60_000);
  const world = indexedDispatch(WORKSPACE, SUBSCRIPTION);

  it('offers every waiting delivery again, a batch at a time as it reads them', async () => {
    // Retries due in an hour: none is taken during the test.
    const later = (Date.now() + 3_600_000) * 1000;
    const steps = deliverySteps(Date.now() * 1000);
    const waiting: Delivery[] = Array.from({ length: WAITING }, (_, i) => {
      steps.schedule(SUBSCRIPTION, `d${i}`);
      steps.attempt(`d${i}`, 'retry');
      return { ...(steps.states.get(`d${i}`) as Delivery), nextAttemptAt: later };
    });
    let read = 0;
    const records: DeliveryRecords = {
      ...recordsForKafka(world.log, world.index, () => world.indexer.pending()),
      async *waiting(): AsyncGenerator<RestoredDelivery> {
        for (const delivery of waiting) {
          read += 1;
          yield { delivery, workspaceId: WORKSPACE };
        }
      },
    };
    const schedule = await world.sharedSchedule();
    const offers: { readonly entry: DueAttempt; readonly readBefore: number }[] = [];
    let calls = 0;
    const watched: SharedRetrySchedule = {
      ...schedule,
      offer: (...entries) => {
        calls += 1;
        offers.push(...entries.map((entry) => ({ entry, readBefore: read })));
        return schedule.offer(...entries);
      },
    };
    const dispatcher = createDispatcher({ ...recordingDeps(world.log, world.directory, []), schedule: { shared: watched }, records, retryDelaysMs: [60_000] });
    world.dispatchers.push(dispatcher);
    dispatcher.start();
    // Its next take finds the schedule's keys gone.
    const admin = new Redis(world.redis.url);
    try {
      await admin.del(...(await admin.keys('*retry}*')));
    } finally {
      admin.disconnect();
    }
    await eventually('every waiting delivery offered', () => offers.length === WAITING, 30_000);
    expect(offers[0]?.readBefore, 'the first offer made after a batch was read, not all').to.be.at.most(1_000);
    expect(calls, 'a call a batch').to.equal(3);
    expect(new Set(offers.map(({ entry }) => entry.deliveryId)).size).to.equal(WAITING);
    expect(offers.every(({ entry }) => entry.dueAt === later && entry.subscriptionId === SUBSCRIPTION)).to.equal(true);
    expect(await schedule.size()).to.equal(WAITING);
  });
});
