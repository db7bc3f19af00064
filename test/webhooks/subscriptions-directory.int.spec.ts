// The subscription directory on a real SQLite log learns of a deletion whose marker it never read: a
// DELETE appends the marker and then deletes the whole stream, so a process tailing a shared log can
// miss the marker; the slot released by the same DELETE stays in the log.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { slotsAggregate, slotsStream } from '../../src/domain/subscription/slots.js';
import { subscriptionAggregate, subscriptionStream, type SubscriptionCommand } from '../../src/domain/subscription/subscription.js';
import type { Decided } from '../../src/domain/aggregate.js';
import type { Either } from 'fp-ts/lib/Either.js';
import { randomId } from '../../src/shared/ids.js';
import { createSecretBox } from '../../src/webhooks/secrets.js';
import { createSubscriptionDirectory, secretContext, type SubscriptionRow } from '../../src/webhooks/subscriptions.js';
import { openTempLog, type TempLog } from '../support/bus-kafka.js';

const WS = 'ws-directory';

const decided = (decision: Either<unknown, readonly Decided[]>): readonly Decided[] => {
  if (decision._tag === 'Left') throw new Error(JSON.stringify(decision.left));
  return decision.right;
};

describe('webhook subscription directory (int, SQLite)', () => {
  let temp: TempLog;
  const secrets = createSecretBox(randomBytes(32));

  beforeEach(() => {
    temp = openTempLog();
  });
  afterEach(() => temp.close());

  const append = (stream: string, events: readonly Decided[]) =>
    temp.log.append(stream, events.map((e) => ({ id: randomId(), type: e.type, workspaceId: WS, data: e.data })), 'any');

  const create = async (id: string) => {
    const command: SubscriptionCommand = {
      kind: 'create',
      url: 'https://receiver.test/hook',
      events: [],
      description: '',
      secretEncrypted: secrets.encrypt('whsec_x', secretContext(WS, id)),
      at: '2026-11-24T00:00:00.000',
    };
    await append(slotsStream(WS), decided(slotsAggregate.decide({ kind: 'claim', subscriptionId: id, max: 20, at: 1, existing: [] }, slotsAggregate.initial)));
    await append(subscriptionStream(id), decided(subscriptionAggregate(WS).decide(command, subscriptionAggregate(WS).initial)));
  };

  it('forgets a subscription whose slot was released although it never read the deletion marker', async () => {
    const directory = createSubscriptionDirectory(temp.log, secrets, () => new Error('unopened'));
    const deleted: SubscriptionRow[] = [];
    directory.onDeleted((row) => deleted.push(row));
    await directory.start();
    const [kept, gone] = [randomId(), randomId()];
    await create(kept);
    await create(gone);
    await directory.waitFor(await temp.log.headPosition());
    expect(directory.list(WS).map((r) => r.id).sort()).to.deep.equal([kept, gone].sort());

    // What such a process reads of the DELETE: the stream is gone, its slot released.
    await temp.log.deleteStream(subscriptionStream(gone));
    const held = [kept, gone].reduce(
      (state, id) => decided(slotsAggregate.decide({ kind: 'claim', subscriptionId: id, max: 20, at: 1, existing: [] }, state)).reduce(slotsAggregate.evolve, state),
      slotsAggregate.initial,
    );
    await append(slotsStream(WS), decided(slotsAggregate.decide({ kind: 'release', subscriptionId: gone }, held)));
    await directory.waitFor(await temp.log.headPosition());

    expect(directory.list(WS).map((r) => r.id)).to.deep.equal([kept]);
    expect(directory.get(WS, gone)).to.equal(undefined);
    expect(deleted.map((r) => r.id)).to.deep.equal([gone]);
    await directory.stop();
  });
});
