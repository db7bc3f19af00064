import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createCommandHandler, createStateCache } from '../../src/app/command-handler.js';
import type { Core } from '../../src/app/core.js';
import { contactStream } from '../../src/domain/contact/contact.js';
import { CONTACT_IDENTITY_CLAIMED, identityKeys, identityStream, type IdentityKey } from '../../src/domain/contact/identity.js';
import type { EventLog } from '../../src/log/event-log.js';
import { systemMicros } from '../../src/log/clock.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { createContactCommands } from '../../src/tickets/contacts.js';

const dir = mkdtempSync(join(tmpdir(), 'contacts-race-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('contact upsert across two API servers (int)', () => {
  let log: ReturnType<typeof openSqliteLog>;
  beforeEach(() => {
    log = openSqliteLog({ file: join(dir, `${randomBytes(6).toString('hex')}.db`) });
  });
  afterEach(() => log.close());

  /** What the contact commands use of the core, as one API server builds it (its own caches), on `on` (default: the log). */
  const server = (on: EventLog = log) =>
    createContactCommands({ log: on, clock: systemMicros, newId: randomId, resourceId: randomId, handle: createCommandHandler(on, randomId, createStateCache(100)) } as unknown as Core);
  /** The same log as one that cannot append several streams in one commit (EventStoreDB). */
  const withoutAppendAll = (): EventLog => ({ ...log, appendAll: undefined });

  const saveWith = async (commands: ReturnType<typeof server>, fields: { email: string; telegram_id?: string }) => {
    const saved = await commands.save('ws', fields, 'api', undefined);
    if (saved._tag === 'Left') throw new Error(saved.left.message);
    return saved.right.contactId;
  };

  /** Two servers race on one person, one giving the email alone, the other both identifiers; then many saves. */
  const race = async (on: () => EventLog) => {
    const [one, two] = [server(on()), server(on())];
    const email = `${randomId()}@example.com`;
    const both = { email, telegram_id: `tg-${email}` };
    const save = (commands: ReturnType<typeof server>, i: number) => saveWith(commands, i % 2 === 0 ? { email } : both);
    const first = await Promise.all([save(one, 1), save(two, 0)]);
    expect(first[0]).to.equal(first[1]);
    const raced = await Promise.all(Array.from({ length: 20 }, (_, i) => save(i % 4 < 2 ? one : two, i)));
    expect(raced).to.deep.equal(Array(20).fill(first[0]));
    const again = await Promise.all([save(one, 0), save(one, 1), save(two, 0), save(two, 1)]);
    expect(again).to.deep.equal(Array(4).fill(first[0]));
    const [telegram, byEmail] = identityKeys(both).map((key) => identityStream('ws', key)) as [string, string];
    for (const stream of [telegram, byEmail]) expect((await log.readStream(stream)).at(-1)?.data['contact_id']).to.equal(first[0]);
    const registered = await log.readAll({ after: 0, types: ['contact.registered'] });
    return { contactId: first[0], telegram: await log.readStream(telegram), registered };
  };

  it('two servers racing on one person end on one contact, and keep answering it from their caches', async () => {
    const { contactId, telegram, registered } = await race(() => log);
    // Each server registers the person with both its claims in one commit: the one that loses the
    // email's claim writes nothing and adopts the other's contact, so no claim is re-pointed.
    expect(telegram.map((e) => e.data['contact_id'])).to.deep.equal([contactId]);
    expect(registered.map((e) => e.data['contact_id'])).to.deep.equal([contactId]);
  });

  it('on a log without appendAll: the server that claimed telegram_id for a new contact re-points it to the contact the email already has', async () => {
    const { contactId, telegram } = await race(withoutAppendAll);
    // Server one claims telegram_id for a new contact while server two gives the email one: one
    // adopts two's contact and re-points its fresh telegram_id claim.
    expect(telegram).to.have.length(2);
    expect(telegram.at(-1)?.data['contact_id']).to.equal(contactId);
  });

  it('registers a new person with the claims of its identifiers in one commit', async () => {
    const before = log.stats().transactions;
    const email = `${randomId()}@example.com`;
    const contactId = await saveWith(server(), { email, telegram_id: `tg-${email}` });
    expect(log.stats().transactions - before).to.equal(1);
    for (const key of identityKeys({ email, telegram_id: `tg-${email}` })) {
      expect((await log.readStream(identityStream('ws', key))).map((e) => e.data['contact_id'])).to.deep.equal([contactId]);
    }
  });

  it('an identifier another server claimed after this one looked writes nothing of the new contact: it adopts the owner', async () => {
    const email = `${randomId()}@example.com`;
    const [telegramKey, emailKey] = identityKeys({ email, telegram_id: `tg-${email}` }) as [IdentityKey, IdentityKey];
    // Another server's claim lands between this server's look at the identifiers and its commit.
    const racing: EventLog = {
      ...log,
      appendAll: async (parts) => {
        await log.append(identityStream('ws', emailKey), [{ id: randomId(), type: CONTACT_IDENTITY_CLAIMED, workspaceId: 'ws', data: { contact_id: 'other', kind: 'email' } }], 'no_stream');
        return log.appendAll(parts);
      },
    };
    const contactId = await saveWith(server(racing), { email, telegram_id: `tg-${email}` });
    expect(contactId).to.equal('other');
    expect((await log.readStream(identityStream('ws', telegramKey))).map((e) => e.data['contact_id'])).to.deep.equal(['other']);
    // The contact this server proposed was never registered; the adopted one is saved with the fields.
    expect((await log.readAll({ after: 0, types: ['contact.registered'] })).map((e) => e.data['contact_id'])).to.deep.equal(['other']);
  });

  it('decides saves of a known contact made at once together, on its stream: one read for the lot, each change in order', async () => {
    const email = `${randomId()}@example.com`;
    let contactId = '';
    let reads = 0;
    const counting: EventLog = {
      ...log,
      readStream: (stream, from) => {
        if (stream === contactStream(contactId)) reads += 1;
        return log.readStream(stream, from);
      },
    };
    // The server that registered the person knows its claims are final (another server's fresh
    // claim may still be re-pointed by it, so a second server takes the identity lock every time).
    const commands = server(counting);
    contactId = await saveWith(commands, { email });
    reads = 0;
    const names = Array.from({ length: 32 }, (_, i) => `Name ${i}`);
    const saved = await Promise.all(names.map((full_name) => commands.save('ws', { email, full_name }, 'api', undefined)));
    expect(saved.map((s) => (s._tag === 'Right' ? s.right.contactId : s.left.message))).to.deep.equal(Array(32).fill(contactId));
    // Run one at a time under the identity lock, each read the stream: 32 reads.
    expect(reads, 'reads of the contact stream').to.be.at.most(2);
    const changed = await log.readStream(contactStream(contactId), 1);
    expect(changed.map((e) => e.data['full_name'])).to.deep.equal(names);
  });
});
