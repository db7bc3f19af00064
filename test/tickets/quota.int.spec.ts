import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { monthOf, quotaStream } from '../../src/domain/ticket/quota.js';
import { WrongExpectedRevision, type EventLog, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { createTicketQuota } from '../../src/tickets/quota.js';

const dir = mkdtempSync(join(tmpdir(), 'ticket-quota-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const NOW = Date.UTC(2026, 10, 21) * 1000;

describe('monthly ticket quota claimer (int)', () => {
  let log: ReturnType<typeof openSqliteLog>;
  beforeEach(() => {
    log = openSqliteLog({ file: join(dir, `${randomBytes(6).toString('hex')}.db`) });
  });
  afterEach(() => log.close());

  const claims = (quota: ReturnType<typeof createTicketQuota>, count: number, limit: number) =>
    Promise.all(Array.from({ length: count }, () => quota.claim('ws', limit, randomId(), false)));

  it('grants exactly the limit when two claimers (two API servers) race on one month, in one group commit each round', async () => {
    const one = createTicketQuota(log, () => NOW, randomId);
    const two = createTicketQuota(log, () => NOW, randomId);
    const before = log.stats().transactions;
    const firstRound = await claims(one, 20, 1000);
    // Pipelined: the 20 concurrent claims of one claimer share the first commit.
    expect(log.stats().transactions - before).to.equal(1);
    expect(firstRound.every(Boolean)).to.equal(true);

    const raced = await Promise.all([claims(one, 40, 50), claims(two, 40, 50)]);
    expect(raced.flat().filter(Boolean)).to.have.length(30);
    expect(await log.readStream(quotaStream('ws', monthOf(NOW)))).to.have.length(50);
    expect(await claims(two, 3, 50)).to.deep.equal([false, false, false]);
    // A higher limit (a plan change) counts the same month further.
    expect(await claims(one, 3, 52)).to.deep.equal([true, true, false]);
  });

  it("after a restart, counts the month from its last revision, reading none of the month's counts", async () => {
    expect((await claims(createTicketQuota(log, () => NOW, randomId), 120, 1000)).every(Boolean)).to.equal(true);
    const read: string[] = [];
    const watched: EventLog = Object.assign(Object.create(log) as EventLog, {
      readStream: (stream: string, fromRevision?: number) => (read.push(stream), log.readStream(stream, fromRevision)),
    });
    const restarted = createTicketQuota(watched, () => NOW, randomId);
    expect(await claims(restarted, 3, 122)).to.deep.equal([true, true, false]);
    expect(read).to.deep.equal([]);
    expect(await log.readStream(quotaStream('ws', monthOf(NOW)))).to.have.length(122);
  });

  const ticketOf = (ticketId: string) => ({
    stream: `ticket-${ticketId}`,
    events: [{ id: randomId(), type: 'ticket.created', workspaceId: 'ws', data: { ticket_id: ticketId } }] as NewEvent[],
    expected: 'no_stream' as const,
  });
  /** Creates `count` tickets at once; each ticket id whose creation was granted, null for a refused one. */
  const creations = (quota: ReturnType<typeof createTicketQuota>, count: number, limit: number) =>
    Promise.all(
      Array.from({ length: count }, async () => {
        const ticketId = randomId();
        return (await quota.countAndAppend('ws', limit, ticketId, ticketOf(ticketId), false)) === null ? null : ticketId;
      }),
    );
  const counted = async () => (await log.readStream(quotaStream('ws', monthOf(NOW)))).map((e) => String(e.data['ticket_id']));
  const created = async (ticketIds: readonly string[]) =>
    (await Promise.all(ticketIds.map((id) => log.readStream(`ticket-${id}`)))).filter((events) => events.length > 0).length;

  it('creates each ticket with its count in one commit: concurrent creations share it', async () => {
    const quota = createTicketQuota(log, () => NOW, randomId);
    const before = log.stats().transactions;
    const granted = await creations(quota, 20, 1000);
    expect(log.stats().transactions - before).to.equal(1);
    expect(granted.every((id) => id !== null)).to.equal(true);
    expect(await counted()).to.have.members(granted as string[]);
    expect(await created(granted as string[])).to.equal(20);
  });

  it('at the limit, writes neither the ticket nor a count', async () => {
    const quota = createTicketQuota(log, () => NOW, randomId);
    const results = await creations(quota, 5, 3);
    expect(results.filter((id) => id === null)).to.have.length(2);
    expect(await counted()).to.have.members(results.filter((id) => id !== null) as string[]);
    expect(await log.headPosition()).to.equal(6);
  });

  it('two claimers (two API servers) racing on one month, with plain counts among the tickets: exactly the limit, a count for each ticket created and no other', async () => {
    const one = createTicketQuota(log, () => NOW, randomId);
    const two = createTicketQuota(log, () => NOW, randomId);
    const tried = Array.from({ length: 60 }, () => randomId());
    const results = await Promise.all([
      ...tried.map((ticketId, i) => (i % 2 === 0 ? one : two).countAndAppend('ws', 25, ticketId, ticketOf(ticketId), false)),
      claims(two, 5, 25),
    ]);
    const granted = tried.filter((_, i) => results[i] !== null);
    const plain = (results.at(-1) as boolean[]).filter(Boolean).length;
    expect(granted.length + plain).to.equal(25);
    expect((await counted()).filter((id) => tried.includes(id))).to.have.members(granted);
    expect(await created(tried)).to.equal(granted.length);
  });

  it('a ticket whose own append fails leaves its count unused, for the next ticket', async () => {
    const quota = createTicketQuota(log, () => NOW, randomId);
    const taken = randomId();
    await log.append(`ticket-${taken}`, ticketOf(taken).events, 'no_stream');
    const failed = await quota.countAndAppend('ws', 1, taken, ticketOf(taken), false).catch((e: unknown) => e);
    expect(failed).to.be.instanceOf(WrongExpectedRevision).with.property('stream', `ticket-${taken}`);
    expect(await counted()).to.deep.equal([]);
    const next = await creations(quota, 2, 1);
    expect(next.filter((id) => id !== null)).to.have.length(1);
    expect(await counted()).to.deep.equal(next.filter((id) => id !== null));
  });

  it('on a log that cannot append two streams at once, counts first, then creates: still exact', async () => {
    const separate: EventLog = { ...log, appendAll: undefined };
    const quota = createTicketQuota(separate, () => NOW, randomId);
    const results = await creations(quota, 6, 4);
    const tickets = results.filter((id): id is string => id !== null);
    expect(tickets).to.have.length(4);
    expect(await counted()).to.have.members(tickets);
    expect(await created(tickets)).to.equal(4);
  });

  it('a resumed request whose first run counted its ticket but was cut off before creating it creates it, counted once', async () => {
    const quota = createTicketQuota(log, () => NOW, randomId);
    const ticketId = randomId();
    // The first run, on a release that counted and created in two commits, stopped between them.
    expect(await quota.claim('ws', 1, ticketId, false)).to.equal(true);
    const resumed = await quota.countAndAppend('ws', 1, ticketId, ticketOf(ticketId), true);
    expect(resumed?.records.map((e) => e.stream)).to.deep.equal([`ticket-${ticketId}`]);
    expect(await counted()).to.deep.equal([ticketId]);
    // Not resumed, the same ticket would be a new one: the month is used up.
    expect(await creations(quota, 1, 1)).to.deep.equal([null]);
  });
});
