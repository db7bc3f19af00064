// A deactivation cancels a dead receiver's backlog in the distributed mode: the dispatchers sharing a
// retry schedule hold none of it until claimed, so each reads the subscription's waiting deliveries
// from the delivery history index a page at a time and cancels a page before it reads the next (its
// memory follows the page, not the backlog), each page's cancellations written together. Every
// delivery ends cancelled, nothing is sent, the schedule is left empty, also with two dispatchers told
// at once as the roles are. Real SQLite log, real Redis (a private server) for the schedule and the index.
import { expect } from 'chai';
import { foldDeliveries, type Delivery } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import type { NewEvent, RecordedEvent } from '../../src/log/event-log.js';
import { createDispatcher, type DeliveryRecords, type Dispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import type { SharedRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import { recordingDeps } from '../support/dispatcher-fixture.js';
import { indexedDispatch } from '../support/indexed-dispatch.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'k'.repeat(32);
/** More than two of the dispatcher's pages (PARKING_BATCH, 1,000). */
const EVENTS = 2_500;
/** Fan-outs under way at once. */
const WINDOW = 250;

describe('dispatchers with a shared schedule told of a deactivation cancel its backlog a page at a time (int)', function () {
  this.timeout(60_000);
  const world = indexedDispatch(WORKSPACE, SUBSCRIPTION);
  let schedule: SharedRetrySchedule;

  const deliveries = async (): Promise<Delivery[]> => [...foldDeliveries(await world.log.readStream(deliveryStream(SUBSCRIPTION))).values()];

  /** A dispatcher whose receiver refuses every attempt (none is due during the test once the first attempts are made); its requests go to `sent`. */
  const dispatcher = (sent: DeliveryRequest[], records: DeliveryRecords = recordsForKafka(world.log, world.index, () => world.indexer.pending())): Dispatcher => {
    const made = createDispatcher({
      ...recordingDeps(world.log, world.directory, []),
      sender: { send: async (request: DeliveryRequest) => (sent.push(request), { delivered: false, statusCode: 503, error: null, latencyMs: 1 }), close: async () => undefined } as never,
      schedule: { shared: schedule },
      records,
      retryDelaysMs: [60_000],
      maxInFlight: 64,
      maxInFlightPerSubscription: 64,
      maxInFlightPerWorkspace: 64,
    });
    world.dispatchers.push(made);
    return made;
  };

  /** EVENTS deliveries waiting for their retry, their first attempts refused by a dispatcher since stopped, all applied by the index. */
  const backlog = async (): Promise<void> => {
    schedule = await world.sharedSchedule();
    const refused: DeliveryRequest[] = [];
    const first = dispatcher(refused);
    first.start();
    const batch: NewEvent[] = Array.from({ length: EVENTS }, (_, n) => ({ id: `${'e'.repeat(27)}${String(n).padStart(5, '0')}`, type: 'ticket.created', workspaceId: WORKSPACE, data: { ticket_id: `t${n}` } }));
    const { records } = await world.log.append('tickets', batch, 'any');
    for (let i = 0; i < records.length; i += WINDOW) await Promise.all(records.slice(i, i + WINDOW).map((event: RecordedEvent) => first.fanOut(event, event.position)));
    await eventually('every first attempt refused', () => refused.length === EVENTS, 30_000);
    await first.stop();
    world.dispatchers.splice(world.dispatchers.indexOf(first), 1);
    await world.indexer.runner.waitFor(await world.log.headPosition());
  };

  /** Started as a dispatcher role starts: from what the index says waits. */
  const restarted = async (sent: DeliveryRequest[], records?: DeliveryRecords): Promise<Dispatcher> => {
    const made = dispatcher(sent, records);
    const pending = await world.indexer.pending();
    await made.resume(pending.deliveries, pending.fannedOutThrough);
    made.start();
    return made;
  };

  const expectAllCancelled = async (sent: readonly DeliveryRequest[]): Promise<void> => {
    const all = await deliveries();
    expect(all).to.have.length(EVENTS);
    expect(all.filter((delivery) => delivery.status !== 'cancelled')).to.deep.equal([]);
    expect(sent, 'nothing sent').to.deep.equal([]);
    expect(await schedule.size(), 'the schedule left empty').to.equal(0);
  };

  it('reads a page, cancels it, then reads the next', async () => {
    await backlog();
    const records = recordsForKafka(world.log, world.index, () => world.indexer.pending());
    const pages: number[] = [];
    /** For each page asked after the first: the previous page's deliveries not recorded cancelled by then. */
    const notYetCancelled: number[] = [];
    const watched: DeliveryRecords = {
      ...records,
      async *waitingPages(subscriptionId, size) {
        for await (const page of records.waitingPages(subscriptionId, size)) {
          pages.push(page.length);
          yield page;
          const now = foldDeliveries(await world.log.readStream(deliveryStream(SUBSCRIPTION)));
          notYetCancelled.push(page.filter((delivery) => now.get(delivery.id)?.status !== 'cancelled').length);
        }
      },
    };
    const sent: DeliveryRequest[] = [];
    const second = await restarted(sent, watched);
    await second.subscriptionDeactivated(SUBSCRIPTION, (await world.log.headPosition()) + 1);
    expect(pages.filter((n) => n > 0)).to.have.length.of.at.least(3);
    expect(Math.max(...pages)).to.be.at.most(1_000);
    expect(pages.reduce((a, b) => a + b, 0)).to.equal(EVENTS);
    expect(notYetCancelled.every((n) => n === 0), 'each page cancelled before the next is read').to.equal(true);
    await expectAllCancelled(sent);
  });

  it('cancels the backlog once, in effect, when two dispatchers are told at once', async () => {
    await backlog();
    const sent: DeliveryRequest[] = [];
    const [a, b] = [await restarted(sent), await restarted(sent)];
    const position = (await world.log.headPosition()) + 1;
    await Promise.all([a.subscriptionDeactivated(SUBSCRIPTION, position), b.subscriptionDeactivated(SUBSCRIPTION, position)]);
    await expectAllCancelled(sent);
  });
});
