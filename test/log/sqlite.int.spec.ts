import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import fc from 'fast-check';
import { WrongExpectedRevision, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { eventLogContract } from './event-log.contract.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-log-'));
const freshFile = (): string => join(dir, `${randomBytes(6).toString('hex')}.db`);
after(() => rmSync(dir, { recursive: true, force: true }));

eventLogContract('sqlite', async ({ clock }) => {
  const log = openSqliteLog({ file: freshFile(), clock, pageSize: 7 });
  return { log, teardown: () => log.close() };
});

eventLogContract('sqlite shared', async ({ clock }) => {
  const log = openSqliteLog({ file: freshFile(), clock, pageSize: 7, shared: true });
  return { log, teardown: () => log.close() };
});

const newEvent = (workspaceId: string, type = 'message.created'): NewEvent => ({
  id: randomBytes(16).toString('hex'),
  type,
  workspaceId,
  data: { text: 'hello' },
});

describe('SQLite event log', () => {
  it('commits appends issued together in one transaction', async () => {
    const log = openSqliteLog({ file: freshFile() });
    const before = log.stats().transactions;
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append(`ticket-${i}`, [newEvent('ws')], 'no_stream')));
    expect(log.stats().transactions - before).to.equal(1);
    expect(await log.headPosition()).to.equal(50);
    await log.close();
  });

  it('a call failing halfway through its inserts leaves no trace in the shared transaction', async () => {
    const log = openSqliteLog({ file: freshFile(), clock: () => 100 });
    const twice = newEvent('ws');
    const [broken, fine] = await Promise.allSettled([
      log.append('broken', [newEvent('ws'), twice, twice], 'any'),
      log.append('fine', [newEvent('ws')], 'any'),
    ]);
    expect(broken.status).to.equal('rejected');
    // The broken call's two rows were taken out, and their positions given back.
    expect(fine.status === 'fulfilled' && [fine.value.records[0]?.offset, fine.value.records[0]?.position]).to.deep.equal([100, 1]);
    expect(await log.readStream('broken')).to.deep.equal([]);
    expect((await log.append('after', [newEvent('ws')], 'any')).records[0]?.offset).to.equal(101);
    expect(log.stats().transactions).to.equal(2);
    await log.close();
  });

  it('a call whose rows cannot be taken out again fails its whole batch rather than commit part of it', async () => {
    const file = freshFile();
    const log = openSqliteLog({ file, shared: true, clock: () => 100 });
    // Another connection makes deleting the rows of stream "stuck" fail.
    const other = new Database(file);
    other.exec("CREATE TRIGGER stuck BEFORE DELETE ON events WHEN OLD.stream = 'stuck' BEGIN SELECT RAISE(ABORT, 'stuck'); END");
    other.close();
    try {
      const twice = newEvent('ws');
      const outcomes = await Promise.allSettled([
        log.append('fine', [newEvent('ws')], 'any'),
        log.append('stuck', [newEvent('ws'), twice, twice], 'any'),
      ]);
      expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(['rejected', 'rejected']);
      expect(await log.headPosition()).to.equal(0);
      const { records } = await log.append('after', [newEvent('ws')], 'any');
      expect([records[0]?.position, records[0]?.offset]).to.deep.equal([1, 100]);
    } finally {
      await log.close();
    }
  });

  it('a call of many events that fails at its last is atomic too, positions and all', async () => {
    const log = openSqliteLog({ file: freshFile() });
    const many = Array.from({ length: 150 }, () => newEvent('ws'));
    const broken = [...many.slice(0, 149), many[0] as NewEvent];
    expect((await log.append('big', broken, 'no_stream').catch((e: unknown) => e)) as Error).to.match(/UNIQUE constraint failed: events\.id/);
    expect(await log.headPosition()).to.equal(0);
    const { records } = await log.append('big', many, 'no_stream');
    expect(records.map((r) => [r.revision, r.position])).to.deep.equal(many.map((_, i) => [i, i + 1]));
    expect((await log.readStream('big')).map((r) => r.id)).to.deep.equal(many.map((e) => e.id));
    await log.close();
  });

  it('a retry with expected any gets the stored records; a call with some known ids is refused whole', async () => {
    const log = openSqliteLog({ file: freshFile() });
    const list = [newEvent('ws'), newEvent('ws')];
    const first = await log.append('ticket-1', list, 'any');
    await log.append('ticket-1', [newEvent('ws')], 'any');
    const again = await log.append('ticket-1', list, 'any');
    expect(again.records.map((r) => [r.id, r.revision, r.position])).to.deep.equal(first.records.map((r) => [r.id, r.revision, r.position]));
    expect(again.nextRevision).to.equal(2);
    const mixed = await log.append('ticket-1', [newEvent('ws'), list[1] as NewEvent], 'any').catch((e: unknown) => e);
    expect((mixed as Error).message).to.match(/1 of 2 event ids are already in the log/);
    expect(await log.readStream('ticket-1')).to.have.length(3);
    await log.close();
  });

  it('appendAll writes several streams in the one group commit, each part as append would', async () => {
    const log = openSqliteLog({ file: freshFile(), clock: () => 100 });
    await log.append('count', [newEvent('ws', 'ticket.quota_used')], 'no_stream');
    const before = log.stats().transactions;
    const [together, alone] = await Promise.all([
      log.appendAll([
        { stream: 'count', events: [newEvent('ws', 'ticket.quota_used')], expected: 0 },
        { stream: 'ticket-1', events: [newEvent('ws'), newEvent('ws')], expected: 'no_stream' },
      ]),
      log.append('ticket-2', [newEvent('ws')], 'no_stream'),
    ]);
    expect(log.stats().transactions - before).to.equal(1);
    expect(together.map((r) => [r.nextRevision, r.records.map((e) => [e.stream, e.position, e.offset])])).to.deep.equal([
      [1, [['count', 2, null]]],
      [1, [['ticket-1', 3, 100], ['ticket-1', 4, 101]]],
    ]);
    expect(alone.records[0]?.offset).to.equal(102);
    await log.close();
  });

  it('appendAll writes nothing when a later part fails, and names its stream; the rest of the commit stands', async () => {
    const log = openSqliteLog({ file: freshFile(), clock: () => 100 });
    await log.append('ticket-1', [newEvent('ws')], 'no_stream');
    const [failed, fine] = await Promise.allSettled([
      log.appendAll([
        { stream: 'count', events: [newEvent('ws', 'ticket.quota_used')], expected: 'no_stream' },
        { stream: 'other', events: [newEvent('ws')], expected: 'no_stream' },
        { stream: 'ticket-1', events: [newEvent('ws')], expected: 'no_stream' },
      ]),
      log.append('fine', [newEvent('ws')], 'no_stream'),
    ]);
    expect(failed.status === 'rejected' && failed.reason).to.be.instanceOf(WrongExpectedRevision).with.property('stream', 'ticket-1');
    expect(await log.readStream('count')).to.deep.equal([]);
    expect(await log.readStream('other')).to.deep.equal([]);
    // The offsets the undone parts took are given again: the next public event follows the last one written.
    expect(fine.status === 'fulfilled' && fine.value.records[0]?.offset).to.equal(101);
    expect((await log.append('after', [newEvent('ws')], 'any')).records[0]?.offset).to.equal(102);
    await log.close();
  });

  it('appendAll with two parts on one stream writes them one after the other; a known-id retry among new parts is refused whole', async () => {
    const log = openSqliteLog({ file: freshFile() });
    const [a, b] = await log.appendAll([
      { stream: 'ticket-1', events: [newEvent('ws')], expected: 'no_stream' },
      { stream: 'ticket-1', events: [newEvent('ws'), newEvent('ws')], expected: 0 },
    ]);
    expect([a?.nextRevision, b?.nextRevision, b?.records.map((e) => e.revision)]).to.deep.equal([0, 2, [1, 2]]);
    const known = (await log.readStream('ticket-1'))[0] as NewEvent;
    const mixed = await log.appendAll([
      { stream: 'other', events: [newEvent('ws')], expected: 'no_stream' },
      { stream: 'ticket-1', events: [known], expected: 'any' },
    ]).catch((e: unknown) => e);
    expect(mixed).to.be.instanceOf(Error);
    expect(await log.readStream('other')).to.deep.equal([]);
    await log.close();
  });

  it('appendAll retried with the same events gets the stored records, written once', async () => {
    const log = openSqliteLog({ file: freshFile() });
    const parts = [
      { stream: 'count', events: [newEvent('ws', 'ticket.quota_used')], expected: 'no_stream' as const },
      { stream: 'ticket-1', events: [newEvent('ws')], expected: 'no_stream' as const },
    ];
    const first = await log.appendAll(parts);
    const again = await log.appendAll(parts);
    expect(again.map((r) => r.records.map((e) => e.position))).to.deep.equal(first.map((r) => r.records.map((e) => e.position)));
    expect(await log.headPosition()).to.equal(2);
    await log.close();
  });

  it('returns offsets with the appended records, null for internal events', async () => {
    let now = 5_000;
    const log = openSqliteLog({ file: freshFile(), clock: () => now });
    const { records } = await log.append('ticket-1', [newEvent('ws'), newEvent('ws', 'apikey.issued'), newEvent('ws')], 'any');
    expect(records.map((r) => r.offset)).to.deep.equal([5_000, null, 5_001]);
    now = 9_000;
    expect((await log.append('ticket-1', [newEvent('ws')], 'any')).records[0]?.offset).to.equal(9_000);
    await log.close();
  });

  it('keeps data, offsets and positions across a reopen, also after the tail was deleted', async () => {
    const file = freshFile();
    const clock = () => 1_000;
    const first = openSqliteLog({ file, clock });
    await first.append('keep', [newEvent('ws')], 'no_stream');
    await first.append('tail', [newEvent('ws'), newEvent('ws')], 'no_stream');
    await first.deleteStream('tail');
    await first.close();

    const second = openSqliteLog({ file, clock });
    // The head is the last event that exists; the deleted positions 2 and 3 are never used again.
    expect(await second.headPosition()).to.equal(1);
    const { records } = await second.append('next', [newEvent('ws')], 'no_stream');
    expect(records[0]).to.include({ position: 4, offset: 1_003 });
    expect((await second.readStream('keep')).map((r) => r.offset)).to.deep.equal([1_000]);
    await second.close();
  });

  it('gives a log made before the type index that index at open, and reads it by type as before', async () => {
    const file = freshFile();
    const first = openSqliteLog({ file });
    await first.append('s', [newEvent('ws', 'ticket.created'), newEvent('ws'), newEvent('ws', 'ticket.created')], 'no_stream');
    await first.close();
    const raw = new Database(file);
    raw.exec('DROP INDEX events_type');
    raw.close();

    const second = openSqliteLog({ file });
    try {
      expect((await second.readAll({ after: 0, limit: 10, types: ['ticket.created'] })).map((e) => e.position)).to.deep.equal([1, 3]);
    } finally {
      await second.close();
    }
    // Looked at once the log is closed: it holds the file alone while open.
    const check = new Database(file, { readonly: true });
    expect(check.prepare("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'events_type'").pluck().get()).to.equal(1);
    check.close();
  });

  it('rejects calls after close', async () => {
    const log = openSqliteLog({ file: freshFile() });
    await log.close();
    let error: unknown;
    await log.append('s', [newEvent('ws')], 'any').catch((e: unknown) => (error = e));
    expect((error as Error).name).to.equal('LogUnavailable');
  });

  it('an acknowledged append survives kill -9 of the writing process', async function () {
    this.timeout(60_000);
    const file = freshFile();
    const sqlite = fileURLToPath(new URL('../../src/log/sqlite.ts', import.meta.url));
    // The child appends from 16 concurrent writers and prints each id once its append resolved.
    const script = `
      import { randomBytes } from 'node:crypto';
      const { openSqliteLog } = await import(${JSON.stringify(sqlite)});
      const log = openSqliteLog({ file: ${JSON.stringify(file)} });
      const writer = async (w) => {
        for (let i = 0; ; i += 1) {
          const id = randomBytes(16).toString('hex');
          await log.append('stream-' + w, [{ id, type: 'message.created', workspaceId: 'ws', data: { i } }], 'any');
          process.stdout.write(id + '\\n');
        }
      };
      for (let w = 0; w < 16; w += 1) void writer(w);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const acknowledged: string[] = [];
    const exited = new Promise((resolve) => child.on('exit', resolve));
    await new Promise<void>((resolve) => {
      createInterface({ input: child.stdout }).on('line', (line) => {
        acknowledged.push(line);
        if (acknowledged.length === 2_000) {
          child.kill('SIGKILL');
          resolve();
        }
      });
    });
    expect(await exited).to.equal(null);

    const log = openSqliteLog({ file });
    const stored = new Set((await log.readAll({ after: 0 })).map((r) => r.id));
    await log.close();
    expect(acknowledged.filter((id) => !stored.has(id))).to.deep.equal([]);
  });
});

describe('SQLite log typed pages (int, property)', () => {
  // Pages of many types scan nearby positions first and then turn to the type index (sqlite-rows.ts):
  // whatever the types, the cursor and the page size, paging gives exactly the log filtered by type,
  // in order, across that turn (a log over twice the scan window, with rare types far apart).
  const TYPES = ['ticket.created', 'message.created', 'ticket.updated', 'delivery.recorded', 'contact.updated', 'ticket.closed', 'rare.one', 'rare.two'];
  const typeAt = (n: number): string => (n % 997 === 0 ? 'rare.one' : n === 4_500 ? 'rare.two' : (TYPES[(n * 7 + (n >> 5)) % 6] as string));
  const COUNT = 5_000;
  let log: ReturnType<typeof openSqliteLog>;
  let all: { position: number; type: string }[] = [];

  before(async () => {
    log = openSqliteLog({ file: freshFile() });
    for (let n = 1; n <= COUNT; n += 500) {
      await log.append('s', Array.from({ length: 500 }, (_, i) => newEvent('ws', typeAt(n + i))), 'any');
    }
    all = (await log.readAll({ after: 0 })).map((r) => ({ position: r.position, type: r.type }));
  });
  after(() => log.close());

  it('pages through exactly the events of the types asked for, in log order', async () => {
    await fc.assert(
      fc.asyncProperty(fc.subarray(TYPES, { minLength: 1 }), fc.integer({ min: 0, max: COUNT }), fc.integer({ min: 1, max: 3_000 }), async (types, after, limit) => {
        const wanted = all.filter((e) => e.position > after && types.includes(e.type)).map((e) => e.position);
        const paged: number[] = [];
        for (let cursor = after; ; ) {
          const page = await log.readAll({ after: cursor, limit, types });
          expect(page.length).to.be.at.most(limit);
          paged.push(...page.map((e) => e.position));
          if (page.length < limit) break;
          cursor = (page.at(-1) as { position: number }).position;
        }
        expect(paged).to.deep.equal(wanted);
      }),
      { numRuns: 60 },
    );
  });
});
