// The subscription directory on a real SQLite log learns of a deletion whose marker it never read: a
// DELETE appends the marker and then deletes the whole stream, so a process tailing a shared log can
// miss the marker; the slot released by the same DELETE stays in the log. It opens rotated secrets as
// they arrive, and keeps the ones it opened before when a rotation's do not open with its keys.
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

  const { evolve, initial, decide } = subscriptionAggregate(WS);
  const stateOf = async (id: string) => (await temp.log.readStream(subscriptionStream(id))).reduce(evolve, initial);
  /** Decides `command` on the subscription as the log holds it and appends what it decided. */
  const run = async (id: string, command: SubscriptionCommand) => append(subscriptionStream(id), decided(decide(command, await stateOf(id))));
  const rotate = (id: string, sealedBy: typeof secrets, secret: string, at: number) =>
    run(id, { kind: 'rotate_secret', secretEncrypted: sealedBy.encrypt(secret, secretContext(WS, id)), graceSeconds: 60, at });

  it("opens a rotation's new secret and keeps the replaced one with the end of its grace period", async () => {
    const directory = createSubscriptionDirectory(temp.log, secrets, () => new Error('unopened'));
    await directory.start();
    const id = randomId();
    await create(id);
    const now = Date.now() * 1000;
    await rotate(id, secrets, 'whsec_y', now);
    await directory.waitFor(await temp.log.headPosition());
    expect(directory.get(WS, id)?.secrets).to.deep.equal({ current: 'whsec_y', previous: { secret: 'whsec_x', expiresAt: now + 60_000_000 } });
    await directory.stop();
  });

  it('leaves out a replaced secret whose grace period is over, and starts although no key opens it', async () => {
    const id = randomId();
    await create(id);
    const longAgo = (Date.now() - 3_600_000) * 1000;
    await rotate(id, secrets, 'whsec_y', longAgo);
    // The current secret sealed again under a new key alone: the replaced secret's key is gone from the ring.
    const onlyNew = createSecretBox(randomBytes(32));
    const to = onlyNew.encrypt('whsec_y', secretContext(WS, id));
    await run(id, { kind: 'reseal', from: (await stateOf(id)).secretEncrypted, to });
    const directory = createSubscriptionDirectory(temp.log, onlyNew, () => new Error('unopened'));
    await directory.start();
    expect(directory.get(WS, id)?.secrets).to.deep.equal({ current: 'whsec_y', previous: null });
    await directory.stop();
  });

  it("keeps signing with the secrets it opened when a rotation's do not open here, and still applies the subscription's other changes", async () => {
    const directory = createSubscriptionDirectory(temp.log, secrets, () => new Error('unopened'));
    await directory.start();
    const id = randomId();
    await create(id);
    await rotate(id, createSecretBox(randomBytes(32)), 'whsec_elsewhere', Date.now() * 1000);
    await run(id, { kind: 'update', isActive: false });
    await directory.waitFor(await temp.log.headPosition());
    expect(directory.get(WS, id)).to.deep.include({ isActive: false, secrets: { current: 'whsec_x', previous: null } });
    expect(directory.workspaceOf(id)).to.equal(WS);
    await directory.stop();
  });
});
