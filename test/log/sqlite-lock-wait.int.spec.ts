// Shared mode: a write whose lock another connection holds waits for it on a timer, not in SQLite's
// busy handler, which would stop this thread's event loop for as long. The other connection here is on
// this same thread, so only a wait that leaves the event loop running lets it finish its transaction.
import { expect } from 'chai';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-lock-wait-'));
const event = (type = 'ticket.created') => ({ id: randomBytes(16).toString('hex'), type, workspaceId: 'ws', data: {} });
const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('SQLite log: waiting for another connection\'s write lock (integration)', () => {
  let log: SqliteEventLog | undefined;
  let other: Database.Database | undefined;
  const open = (busyTimeoutMs: number) => {
    const file = join(dir, `${randomBytes(4).toString('hex')}.sqlite`);
    log = openSqliteLog({ file, shared: true, busyTimeoutMs });
    other = new Database(file, { timeout: 0 });
    return log;
  };
  afterEach(async () => {
    if (other?.inTransaction) other.exec('ROLLBACK');
    other?.close();
    await log?.close();
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('commits once the lock is released, with the writes submitted meanwhile, in their order', async () => {
    const log = open(5_000);
    other!.exec('BEGIN IMMEDIATE');
    const first = log.append('ticket-1', [event()], 'no_stream');
    const second = log.append('ticket-1', [event('message.created')], 0);
    let ticks = 0;
    const ticking = setInterval(() => (ticks += 1), 5);
    // Released by this thread's own timer: it fires only if the waiting write leaves the loop running.
    await later(200);
    other!.exec('COMMIT');
    const [a, b] = await Promise.all([first, second]);
    clearInterval(ticking);
    expect(ticks, 'the event loop ran while the write waited').to.be.greaterThan(0);
    expect(a.records[0]!.position).to.be.below(b.records[0]!.position);
    expect((await log.readStream('ticket-1')).map((r) => r.type)).to.deep.equal(['ticket.created', 'message.created']);
  });

  it('fails the write with SQLITE_BUSY once the lock is held past the wait, having written nothing, and writes again after', async () => {
    const log = open(150);
    other!.exec('BEGIN IMMEDIATE');
    const refused = await log.append('ticket-2', [event()], 'no_stream').then(
      () => null,
      (error: unknown) => error as { code?: string },
    );
    expect(refused?.code).to.equal('SQLITE_BUSY');
    other!.exec('COMMIT');
    expect(await log.readStream('ticket-2')).to.have.length(0);
    await log.append('ticket-2', [event()], 'no_stream');
    expect(await log.readStream('ticket-2')).to.have.length(1);
  });

  it('reads while another connection holds the write lock', async () => {
    const log = open(5_000);
    await log.append('ticket-3', [event()], 'no_stream');
    other!.exec('BEGIN IMMEDIATE');
    expect(await log.readStream('ticket-3')).to.have.length(1);
    other!.exec('COMMIT');
  });
});
