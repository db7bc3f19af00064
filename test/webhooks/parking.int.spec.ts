// The parking lot on a real SQLite file: what comes out (each delivery as it was parked) and in which
// order, against a model of it (a list) under random parks, takes and drops; its counts, kept without a scan; its file removed at open
// and at close (it is a scratch pad a restart rebuilds, never read back).
import { expect } from 'chai';
import fc from 'fast-check';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { Delivery } from '../../src/domain/delivery/delivery.js';
import { openParkingLot, type ParkedAttempt, type ParkingLot } from '../../src/webhooks/dispatch/parking.js';

const SUBSCRIPTIONS = ['s1', 's2', 's3'];

interface Planned {
  readonly subscriptionId: string;
  readonly dueAt: number;
  readonly retry: boolean;
}

type Op =
  | { readonly kind: 'park'; readonly attempts: readonly Planned[] }
  | { readonly kind: 'retries'; readonly subscriptionId: string; readonly until: number; readonly limit: number }
  | { readonly kind: 'firsts' | 'any'; readonly subscriptionId: string; readonly limit: number }
  | { readonly kind: 'drop'; readonly subscriptionId: string; readonly limit: number };

/** A waiting delivery as the dispatcher holds one, its history as long as its attempts. */
const waiting = (id: string, { subscriptionId, dueAt, retry }: Planned): Delivery => ({
  id,
  subscriptionId,
  eventId: `e-${id}`,
  eventType: 'ticket.created',
  eventPosition: dueAt + 1,
  replayId: null,
  createdAt: 1_000,
  status: 'waiting',
  round: 1,
  attempt: retry ? 1 : 0,
  nextAttemptAt: dueAt,
  history: retry ? [{ round: 1, attempt: 1, delivered: false, statusCode: 503, error: 'Service "Unavailable"', latencyMs: 3, attemptedAt: 2_000 }] : [],
});

const attempt = fc.record({ subscriptionId: fc.constantFrom(...SUBSCRIPTIONS), dueAt: fc.integer({ min: 0, max: 20 }), retry: fc.boolean() });
const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('park' as const), attempts: fc.array(attempt, { maxLength: 8 }) }),
  fc.record({ kind: fc.constant('retries' as const), subscriptionId: fc.constantFrom(...SUBSCRIPTIONS), until: fc.integer({ min: -1, max: 21 }), limit: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constantFrom('firsts' as const, 'any' as const), subscriptionId: fc.constantFrom(...SUBSCRIPTIONS), limit: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant('drop' as const), subscriptionId: fc.constantFrom(...SUBSCRIPTIONS), limit: fc.integer({ min: 1, max: 6 }) }),
);

/** Earliest due first, then in the order parked. */
const inOrder = (parked: readonly ParkedAttempt[]) => (a: ParkedAttempt, b: ParkedAttempt) => a.dueAt - b.dueAt || parked.indexOf(a) - parked.indexOf(b);

describe('parking lot (int, SQLite)', () => {
  let dir: string;
  let file: string;
  let lot: ParkingLot | null;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-parking-'));
    file = path.join(dir, 'parked.sqlite');
    lot = null;
  });

  afterEach(() => {
    lot?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives out what a list would: retries by due time, first attempts per subscription in order, counts kept', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops) => {
        const tested = openParkingLot(file);
        try {
          let model: ParkedAttempt[] = [];
          let n = 0;
          const takeFromModel = (picked: readonly ParkedAttempt[]): ParkedAttempt[] => {
            model = model.filter((a) => !picked.includes(a));
            return [...picked];
          };
          for (const step of ops) {
            if (step.kind === 'park') {
              const attempts = step.attempts.map((a) => ({ delivery: waiting(`d${n++}`, a), dueAt: a.dueAt, retry: a.retry }));
              tested.park(attempts);
              model.push(...attempts);
            } else if (step.kind === 'retries') {
              const want = takeFromModel([...model.filter((a) => a.retry && a.delivery.subscriptionId === step.subscriptionId && a.dueAt <= step.until)].sort(inOrder(model)).slice(0, step.limit));
              expect(tested.takeRetries(step.subscriptionId, step.until, step.limit)).to.deep.equal(want);
            } else if (step.kind === 'firsts') {
              const want = takeFromModel([...model.filter((a) => !a.retry && a.delivery.subscriptionId === step.subscriptionId)].sort(inOrder(model)).slice(0, step.limit));
              expect(tested.takeFirsts(step.subscriptionId, step.limit)).to.deep.equal(want);
            } else if (step.kind === 'any') {
              const mine = model.filter((a) => a.delivery.subscriptionId === step.subscriptionId);
              const got = tested.takeAny(step.subscriptionId, step.limit);
              expect(got).to.have.length(Math.min(step.limit, mine.length));
              expect(mine).to.deep.include.members(got);
              takeFromModel(mine.filter((a) => got.some((g) => g.delivery.id === a.delivery.id)));
            } else {
              const mine = model.filter((a) => a.delivery.subscriptionId === step.subscriptionId);
              expect(tested.drop(step.subscriptionId, step.limit)).to.equal(Math.min(step.limit, mine.length));
              // Which ones go is the lot's choice: the model follows what is left.
              const left = new Set([...tested.takeAny(step.subscriptionId, mine.length)].map((a) => a.delivery.id));
              tested.park(mine.filter((a) => left.has(a.delivery.id)));
              model = [...model.filter((a) => a.delivery.subscriptionId !== step.subscriptionId), ...mine.filter((a) => left.has(a.delivery.id))];
            }
            expect(tested.size()).to.equal(model.length);
            for (const s of SUBSCRIPTIONS) {
              expect(tested.firsts(s), s).to.equal(model.filter((a) => !a.retry && a.delivery.subscriptionId === s).length);
              expect(tested.has(s), s).to.equal(model.some((a) => a.delivery.subscriptionId === s));
            }
            expect(tested.firsts()).to.equal(model.filter((a) => !a.retry).length);
            expect([...tested.subscriptions()].sort()).to.deep.equal([...new Set(model.map((a) => a.delivery.subscriptionId))].sort());
            expect(tested.earliestDue()).to.equal(model.length === 0 ? null : Math.min(...model.map((a) => a.dueAt)));
          }
        } finally {
          tested.close();
        }
      }),
      { numRuns: 150 },
    );
  });

  it('starts empty over a file a killed process left, and removes its file when closed', () => {
    writeFileSync(file, 'not a database: what a crash left behind');
    lot = openParkingLot(file);
    expect(lot.size()).to.equal(0);
    lot.park([{ delivery: waiting('d1', { subscriptionId: 's1', dueAt: 1, retry: true }), dueAt: 1, retry: true }]);
    expect(existsSync(file)).to.equal(true);
    lot.close();
    lot = null;
    expect(existsSync(file)).to.equal(false);
    lot = openParkingLot(file);
    expect(lot.takeRetries('s1', Number.MAX_SAFE_INTEGER, 10)).to.deep.equal([]);
  });
});
