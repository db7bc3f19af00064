// A dispatcher sharing its retry schedule in Redis takes over attempts another dispatcher scheduled.
// Once their subscription has more deliveries waiting than it keeps (a receiver down for hours), it
// reads only those it takes over from the delivery history index (and the records after it), a turn's
// claims in one look-up, instead of keeping a view of all of them: a dead receiver's backlog is not
// held in its memory. Each delivery is still sent once and delivered. Real SQLite log, real Redis (a
// private server) for the schedule and the index.
import { expect } from 'chai';
import { foldDeliveries } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { createDispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { recordsForKafka } from '../../src/webhooks/dispatch/shared-history.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { DeliveryIndex } from '../../projections/deliveries-index.js';
import { appendPublicEvent, recordingDeps } from '../support/dispatcher-fixture.js';
import { indexedDispatch } from '../support/indexed-dispatch.js';
import { eventually } from '../support/webhooks-dispatch.js';

const WORKSPACE = 'w'.repeat(32);
const SUBSCRIPTION = 'b'.repeat(32);
const EVENTS = 30;
/** Long enough for the first dispatcher to stop before any retry is due. */
const RETRY_MS = 1_500;

describe('dispatcher with a shared schedule taking over a backlog larger than it keeps (int)', function () {
  this.timeout(30_000);
  const world = indexedDispatch(WORKSPACE, SUBSCRIPTION);

  const deliveries = async () => [...foldDeliveries(await world.log.readStream(deliveryStream(SUBSCRIPTION))).values()];

  /**
   * A first dispatcher fans out EVENTS events to a receiver that is down and stops once every first
   * attempt is recorded failed; a second one, started from the index, takes every retry over as it
   * falls due, the receiver answering. Returns what the second sent and, for each time it read a
   * subscription's waiting deliveries whole from the index (a view it started), how many waited then.
   */
  const takenOver = async (waitingKept?: number): Promise<{ sent: DeliveryRequest[]; seeded: number[] }> => {
    const { log, index, indexer, directory, dispatchers } = world;
    const schedule = await world.sharedSchedule();
    const refused: DeliveryRequest[] = [];
    const first = createDispatcher({
      ...recordingDeps(log, directory, []),
      sender: { send: async (request: DeliveryRequest) => (refused.push(request), { delivered: false, statusCode: 503, error: null, latencyMs: 1 }), close: async () => undefined } as never,
      schedule: { shared: schedule },
      records: recordsForKafka(log, index, () => indexer.pending()),
      retryDelaysMs: [RETRY_MS, RETRY_MS],
    });
    dispatchers.push(first);
    first.start();
    for (let n = 1; n <= EVENTS; n++) {
      const event = await appendPublicEvent(log, WORKSPACE, n);
      await first.fanOut(event, event.position);
    }
    await eventually('every first attempt recorded failed', async () => (await deliveries()).filter((d) => d.status === 'waiting' && d.attempt === 1).length === EVENTS);
    await first.stop();
    dispatchers.splice(dispatchers.indexOf(first), 1);
    expect(refused).to.have.length(EVENTS);

    const seeded: number[] = [];
    const watchedIndex: DeliveryIndex = {
      ...index,
      async waitingOf(subscriptionId) {
        const seed = await index.waitingOf(subscriptionId);
        seeded.push(seed.deliveries.length);
        return seed;
      },
    };
    const sent: DeliveryRequest[] = [];
    const second = createDispatcher({
      ...recordingDeps(log, directory, sent),
      schedule: { shared: schedule },
      records: recordsForKafka(log, watchedIndex, () => indexer.pending()),
      retryDelaysMs: [RETRY_MS, RETRY_MS],
      ...(waitingKept === undefined ? {} : { waitingKept }),
    });
    dispatchers.push(second);
    const pending = await indexer.pending();
    await second.resume(pending.deliveries, pending.fannedOutThrough);
    second.start();
    await eventually('every delivery delivered', async () => (await deliveries()).filter((d) => d.status === 'delivered').length === EVENTS, 15_000);
    return { sent, seeded };
  };

  it('reads each attempt it takes over from the index, keeping none of the backlog, and sends each once', async () => {
    const { sent, seeded } = await takenOver(5);
    expect(sent.map((r) => r.attempt)).to.deep.equal(Array<number>(EVENTS).fill(2));
    expect(new Set(sent.map((r) => r.deliveryId)).size).to.equal(EVENTS);
    // None while the backlog was over the bound (one may start once under half of it is left).
    expect(seeded.filter((waiting) => waiting > 5)).to.deep.equal([]);
  });

  it('keeps a view of a backlog within the bound, started from the index once', async () => {
    const { sent, seeded } = await takenOver();
    expect(sent.map((r) => r.attempt)).to.deep.equal(Array<number>(EVENTS).fill(2));
    expect(new Set(sent.map((r) => r.deliveryId)).size).to.equal(EVENTS);
    expect(seeded[0], 'the first read of it started from the index').to.equal(EVENTS);
  });
});
