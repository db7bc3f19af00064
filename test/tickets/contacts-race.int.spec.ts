import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { createCommandHandler, createStateCache } from '../../src/app/command-handler.js';
import type { Core } from '../../src/app/core.js';
import { identityKeys, identityStream } from '../../src/domain/contact/identity.js';
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

  /** What the contact commands use of the core, as one API server builds it (its own caches). */
  const server = () =>
    createContactCommands({ log, clock: systemMicros, newId: randomId, resourceId: randomId, handle: createCommandHandler(log, randomId, createStateCache(100)) } as unknown as Core);

  it('two servers racing on one person end on one contact, and keep answering it from their caches', async () => {
    const [one, two] = [server(), server()];
    const email = `${randomId()}@example.com`;
    const both = { email, telegram_id: `tg-${email}` };
    const save = async (commands: ReturnType<typeof server>, i: number) => {
      const saved = await commands.save('ws', i % 2 === 0 ? { email } : both, 'api');
      if (saved._tag === 'Left') throw new Error(saved.left.message);
      return saved.right.contactId;
    };
    // Server one claims telegram_id for a new contact while server two gives the email one: one
    // adopts two's contact and re-points its fresh telegram_id claim.
    const first = await Promise.all([save(one, 1), save(two, 0)]);
    expect(first[0]).to.equal(first[1]);
    const [telegram, byEmail] = identityKeys(both).map((key) => identityStream('ws', key));
    expect(await log.readStream(telegram as string)).to.have.length(2);

    const raced = await Promise.all(Array.from({ length: 20 }, (_, i) => save(i % 4 < 2 ? one : two, i)));
    expect(raced).to.deep.equal(Array(20).fill(first[0]));
    const again = await Promise.all([save(one, 0), save(one, 1), save(two, 0), save(two, 1)]);
    expect(again).to.deep.equal(Array(4).fill(first[0]));
    for (const stream of [telegram, byEmail]) expect((await log.readStream(stream as string)).at(-1)?.data['contact_id']).to.equal(first[0]);
  });
});
