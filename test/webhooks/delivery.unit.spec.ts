import { expect } from 'chai';
import type { Decided } from '../../src/domain/aggregate.js';
import { deliveryAggregate, foldDeliveries, nextAttemptAt, packSteps, type Delivery, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { deliveryIdOf, legacyDeliveryIdOf, recordedEventId, replayDeliveryIdOf } from '../../src/domain/delivery/ids.js';

const DELAYS = [30_000, 120_000, 600_000, 3_600_000, 21_600_000];
const SECOND = 1_000_000;

const run = (state: Delivery | null, command: DeliveryCommand): { state: Delivery | null; events: readonly Decided[] } => {
  const result = deliveryAggregate.decide(command, state);
  if (result._tag === 'Left') throw new Error(result.left.message);
  return { state: result.right.reduce(deliveryAggregate.evolve, state), events: result.right };
};

const scheduled = (): Delivery =>
  run(null, { kind: 'schedule', deliveryId: 'd1', subscriptionId: 's1', eventId: 'e1', eventType: 'ticket.created', eventPosition: 7, fannedOutThrough: 6, at: 1_000 * SECOND })
    .state as Delivery;

const fail = { delivered: false, statusCode: 500, error: 'HTTP 500', latencyMs: 3 };
const ok = { delivered: true, statusCode: 200, error: null, latencyMs: 2 };

describe('delivery aggregate', () => {
  it('waits for attempt 1 right away once scheduled', () => {
    const d = scheduled();
    expect(d).to.include({ status: 'waiting', attempt: 0, round: 1, nextAttemptAt: 1_000 * SECOND, eventPosition: 7 });
  });

  it('follows the schedule: attempt n+1 comes delay[n-1] after attempt n, and attempt 6 failing ends failed', () => {
    let d = scheduled();
    let at = 1_000 * SECOND;
    for (let attempt = 1; attempt <= 5; attempt++) {
      d = run(d, { kind: 'record_attempt', attempt, outcome: fail, at, retryDelaysMs: DELAYS }).state as Delivery;
      expect(d.status).to.equal('waiting');
      expect(d.nextAttemptAt).to.equal(at + (DELAYS[attempt - 1] as number) * 1000);
      at = d.nextAttemptAt as number;
    }
    d = run(d, { kind: 'record_attempt', attempt: 6, outcome: fail, at, retryDelaysMs: DELAYS }).state as Delivery;
    expect(d).to.include({ status: 'failed', attempt: 6, nextAttemptAt: null });
    expect(d.history.map((a) => a.attempt)).to.deep.equal([1, 2, 3, 4, 5, 6]);
  });

  it('is delivered on a 2xx at any attempt', () => {
    let d = run(scheduled(), { kind: 'record_attempt', attempt: 1, outcome: fail, at: 1, retryDelaysMs: DELAYS }).state as Delivery;
    d = run(d, { kind: 'record_attempt', attempt: 2, outcome: ok, at: 2, retryDelaysMs: DELAYS }).state as Delivery;
    expect(d).to.include({ status: 'delivered', attempt: 2, nextAttemptAt: null });
  });

  it('ignores a repeated outcome and an outcome for a finished delivery', () => {
    const once = run(scheduled(), { kind: 'record_attempt', attempt: 1, outcome: fail, at: 1, retryDelaysMs: DELAYS }).state as Delivery;
    expect(run(once, { kind: 'record_attempt', attempt: 1, outcome: ok, at: 2, retryDelaysMs: DELAYS }).events).to.deep.equal([]);
    const done = run(once, { kind: 'record_attempt', attempt: 2, outcome: ok, at: 2, retryDelaysMs: DELAYS }).state as Delivery;
    expect(run(done, { kind: 'record_attempt', attempt: 3, outcome: ok, at: 3, retryDelaysMs: DELAYS }).events).to.deep.equal([]);
    expect(run(done, { kind: 'cancel', reason: 'x', at: 3 }).events).to.deep.equal([]);
  });

  it('does not schedule twice (a replayed fan-out)', () => {
    expect(run(scheduled(), { kind: 'schedule', deliveryId: 'd1', subscriptionId: 's1', eventId: 'e1', eventType: 'ticket.created', eventPosition: 7, fannedOutThrough: 6, at: 5 }).events).to.deep.equal([]);
  });

  it('cancels a waiting delivery', () => {
    const d = run(scheduled(), { kind: 'cancel', reason: 'subscription_inactive', at: 2 }).state as Delivery;
    expect(d).to.include({ status: 'cancelled', nextAttemptAt: null });
  });

  it('retries a failed or cancelled delivery as a new round from attempt 1, and refuses others', () => {
    const cancelled = run(scheduled(), { kind: 'cancel', reason: 'x', at: 2 }).state as Delivery;
    const again = run(cancelled, { kind: 'retry', at: 9 }).state as Delivery;
    expect(again).to.include({ status: 'waiting', round: 2, attempt: 0, nextAttemptAt: 9 });
    const refused = deliveryAggregate.decide({ kind: 'retry', at: 3 }, scheduled());
    expect(refused._tag === 'Left' && refused.left.code).to.equal('CONFLICT');
    const delivered = run(scheduled(), { kind: 'record_attempt', attempt: 1, outcome: ok, at: 1, retryDelaysMs: DELAYS }).state as Delivery;
    expect(deliveryAggregate.decide({ kind: 'retry', at: 3 }, delivered)._tag).to.equal('Left');
  });

  it('has no attempt after the last delay', () => {
    expect(nextAttemptAt(5, 0, DELAYS)).to.equal(DELAYS[4]! * 1000);
    expect(nextAttemptAt(6, 0, DELAYS)).to.equal(null);
  });

  it('folds a stream of several deliveries', () => {
    const a = run(null, { kind: 'schedule', deliveryId: 'a', subscriptionId: 's', eventId: 'e1', eventType: 't', eventPosition: 1, fannedOutThrough: 0, at: 1 });
    const b = run(null, { kind: 'schedule', deliveryId: 'b', subscriptionId: 's', eventId: 'e2', eventType: 't', eventPosition: 2, fannedOutThrough: 1, at: 2 });
    const aDone = run(a.state, { kind: 'record_attempt', attempt: 1, outcome: ok, at: 3, retryDelaysMs: DELAYS });
    const folded = foldDeliveries([packSteps([...a.events, ...b.events]), ...aDone.events]);
    expect([...folded.keys()]).to.deep.equal(['a', 'b']);
    expect(folded.get('a')?.status).to.equal('delivered');
    expect(folded.get('b')?.status).to.equal('waiting');
  });

  it('folds repeated steps (an at-least-once record) as if they were there once', () => {
    const a = run(null, { kind: 'schedule', deliveryId: 'a', subscriptionId: 's', eventId: 'e1', eventType: 't', eventPosition: 1, fannedOutThrough: 0, at: 1 });
    const failed = run(a.state, { kind: 'record_attempt', attempt: 1, outcome: fail, at: 2, retryDelaysMs: DELAYS });
    const once = foldDeliveries([...a.events, ...failed.events]).get('a');
    const twice = foldDeliveries([...a.events, ...failed.events, ...a.events, ...failed.events]).get('a');
    expect(twice).to.deep.equal(once);
    expect(twice?.history.length).to.equal(1);
  });
});

describe('delivery ids', () => {
  const EVENT = '019ad1b2c3d4' + 'e'.repeat(20);

  it('are 32 hex, stable per (event, subscription) and distinct across subscriptions', () => {
    expect(deliveryIdOf(EVENT, 's1')).to.match(/^[0-9a-f]{32}$/).and.equal(deliveryIdOf(EVENT, 's1'));
    expect(deliveryIdOf(EVENT, 's1')).to.not.equal(deliveryIdOf(EVENT, 's2'));
    expect(replayDeliveryIdOf(EVENT, 's1', 'r1')).to.match(/^[0-9a-f]{32}$/).and.not.equal(deliveryIdOf(EVENT, 's1'));
  });

  it("start with their event id's time, so the ids of later events sort after those of earlier ones", () => {
    expect(deliveryIdOf(EVENT, 's1').slice(0, 12)).to.equal(EVENT.slice(0, 12));
    expect(replayDeliveryIdOf(EVENT, 's1', 'r1').slice(0, 12)).to.equal(EVENT.slice(0, 12));
    const eventIdAt = (ms: number, rest: string) => `${ms.toString(16).padStart(12, '0')}${rest}`;
    const random = fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: 20, maxLength: 20 });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 47 }), fc.integer({ min: 1, max: 2 ** 20 }), random, random, fc.string(), (ms, later, a, b, sub) => {
        const [earlier, after] = [deliveryIdOf(eventIdAt(ms, a), sub), deliveryIdOf(eventIdAt(ms + later, b), sub)];
        return earlier < after && /^[0-9a-f]{32}$/.test(earlier);
      }),
    );
  });

  it('are still 32 hex for an event id of another shape', () => {
    fc.assert(fc.property(fc.string(), fc.string(), (eventId, sub) => /^[0-9a-f]{32}$/.test(deliveryIdOf(eventId, sub))));
  });

  it('keep the id an older release gave each delivery (the hash alone), byte for byte', () => {
    expect(legacyDeliveryIdOf(EVENT, 's1')).to.equal(createHash('sha256').update(`delivery:${EVENT}:s1`).digest('hex').slice(0, 32));
    expect(legacyDeliveryIdOf(EVENT, 's1')).to.not.equal(deliveryIdOf(EVENT, 's1'));
  });

  it('give a packed group of steps a log event id that is the same only for the same steps, starting with its first delivery\'s time', () => {
    const attempt = (round: number, n: number) => ({ type: 'delivery.attempted', data: { delivery_id: deliveryIdOf(EVENT, 's1'), round, attempt: n } });
    expect(recordedEventId([attempt(1, 1)])).to.match(/^[0-9a-f]{32}$/).and.equal(recordedEventId([attempt(1, 1)]));
    expect(new Set([recordedEventId([attempt(1, 1)]), recordedEventId([attempt(1, 2)]), recordedEventId([attempt(2, 1)]), recordedEventId([attempt(1, 1), attempt(1, 2)])]).size).to.equal(4);
    expect(recordedEventId([attempt(1, 1)]).slice(0, 12)).to.equal(EVENT.slice(0, 12));
    expect(recordedEventId([{ type: 'delivery.attempted', data: { delivery_id: 'd', round: 1, attempt: 1 } }])).to.match(/^[0-9a-f]{32}$/);
  });
});
