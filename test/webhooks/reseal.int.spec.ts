// Resealing after a key rotation, on a real SQLite log and command handler: what needs it is sealed
// again with the current key once, whoever else resealed first; a failure is counted and skipped.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createCommandHandler } from '../../src/app/command-handler.js';
import type { Core } from '../../src/app/core.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { resealSecrets } from '../../src/webhooks/reseal.js';
import { createSecretBox, type SecretBox } from '../../src/webhooks/secrets.js';
import { runSubscriptionCommand, secretContext, type SealedSecret } from '../../src/webhooks/subscriptions.js';

const WS = 'ws1';
const A = Buffer.alloc(32, 0xa1);
const B = Buffer.alloc(32, 0xb2);
const ring = createSecretBox(B, [A]);
const never = () => false;

describe('resealing webhook secrets', () => {
  let dir: string;
  let log: EventLog;
  let core: Core;

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-reseal-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    // runSubscriptionCommand needs only the command handler.
    core = { log, handle: createCommandHandler(log, randomId) } as unknown as Core;
  });
  afterEach(async () => {
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A subscription created with its secret sealed by `box`, as the read model lists it. */
  const subscription = async (box: SecretBox): Promise<SealedSecret> => {
    const id = randomId();
    const secret = `whsec_${id}`;
    const sealed = box.encrypt(secret, secretContext(WS, id));
    await runSubscriptionCommand(core, WS, id, { kind: 'create', url: 'https://x.test/h', events: [], description: '', secretEncrypted: sealed, at: '2026-01-01T00:00:00' }, undefined);
    return { workspaceId: WS, id, secrets: { current: secret, previous: null }, sealed, sealedPrevious: null };
  };

  const resealedIn = async (id: string) =>
    (await log.readStream(subscriptionStream(id))).filter((e) => e.type === SUBSCRIPTION_EVENTS.secretResealed).map((e) => String(e.data['secret_encrypted']));

  it('seals again with the current key only what a previous key sealed, once', async () => {
    const old = [await subscription(createSecretBox(A)), await subscription(createSecretBox(A))];
    const current = await subscription(ring);
    const listed = [...old, current];

    expect(await resealSecrets(core, { secrets: () => listed }, ring, never)).to.deep.equal({ resealed: 2, failed: 0 });
    for (const { id, secrets } of old) {
      const [sealed, ...more] = await resealedIn(id);
      expect(more).to.deep.equal([]);
      expect(createSecretBox(B).decrypt(sealed as string, secretContext(WS, id))).to.equal(secrets.current);
    }
    expect(await resealedIn(current.id)).to.deep.equal([]);
  });

  it('writes nothing for a secret resealed meanwhile (another process) or a subscription deleted meanwhile', async () => {
    const raced = await subscription(createSecretBox(A));
    const deleted = await subscription(createSecretBox(A));
    await resealSecrets(core, { secrets: () => [raced] }, ring, never);
    await runSubscriptionCommand(core, WS, deleted.id, { kind: 'delete' }, undefined);

    // The same stale list, as a second process read it before the first resealed.
    expect(await resealSecrets(core, { secrets: () => [raced, deleted] }, ring, never)).to.deep.equal({ resealed: 0, failed: 0 });
    expect(await resealedIn(raced.id)).to.have.length(1);
    expect(await resealedIn(deleted.id)).to.deep.equal([]);
  });

  it('counts a failed append and goes on with the next; stops when told', async () => {
    const [first, second] = [await subscription(createSecretBox(A)), await subscription(createSecretBox(A))];
    const handle = core.handle;
    const failing = {
      ...core,
      handle: ((aggregate, stream, workspaceId, command, scope) => {
        if (stream === subscriptionStream(first.id)) return Promise.reject(new Error('log unavailable'));
        return handle(aggregate, stream, workspaceId, command, scope);
      }) as Core['handle'],
    };
    expect(await resealSecrets(failing, { secrets: () => [first, second] }, ring, never)).to.deep.equal({ resealed: 1, failed: 1 });
    expect(await resealedIn(second.id)).to.have.length(1);
    expect(await resealSecrets(core, { secrets: () => [first] }, ring, () => true)).to.deep.equal({ resealed: 0, failed: 0 });
    expect(await resealedIn(first.id)).to.deep.equal([]);
  });
});
