// Stream revisions and workspace offsets as an append finds them: after another connection's commits,
// after a batch rolled back as a whole, and after a stream was deleted. Any memory of them a
// connection might keep to spare the reads under the write lock must pass these.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { WrongExpectedRevision, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-revisions-'));
const freshFile = (): string => join(dir, `${randomBytes(6).toString('hex')}.db`);
after(() => rmSync(dir, { recursive: true, force: true }));

const newEvent = (workspaceId = 'ws'): NewEvent => ({ id: randomBytes(16).toString('hex'), type: 'message.created', workspaceId, data: {} });
const rejection = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => null, (error: unknown) => error);

describe('SQLite log: revisions and offsets across connections, rollbacks and deletes (integration)', () => {
  it("two connections on one shared file each append on the other's revisions and offsets", async () => {
    const file = freshFile();
    const [a, b] = [openSqliteLog({ file, shared: true, clock: () => 100 }), openSqliteLog({ file, shared: true, clock: () => 100 })];
    try {
      const offsets: (number | null | undefined)[] = [];
      offsets.push((await a.append('ticket-1', [newEvent()], 'no_stream')).records[0]?.offset);
      offsets.push((await b.append('ticket-1', [newEvent()], 0)).records[0]?.offset);
      offsets.push((await a.append('ticket-1', [newEvent()], 1)).records[0]?.offset);
      offsets.push((await b.append('ticket-1', [newEvent()], 2)).records[0]?.offset);
      expect(offsets).to.deep.equal([100, 101, 102, 103]);
      expect((await a.readStream('ticket-1')).map((r) => r.revision)).to.deep.equal([0, 1, 2, 3]);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('refuses an append whose expected revision another connection has moved past', async () => {
    const file = freshFile();
    const [a, b] = [openSqliteLog({ file, shared: true }), openSqliteLog({ file, shared: true })];
    try {
      await a.append('ticket-1', [newEvent()], 'no_stream');
      await b.append('ticket-1', [newEvent()], 0);
      const stale = await rejection(a.append('ticket-1', [newEvent()], 0));
      expect(stale).to.be.instanceOf(WrongExpectedRevision).with.property('actual', 1);
      await b.deleteStream('ticket-1');
      expect((await a.append('ticket-1', [newEvent()], 'no_stream')).nextRevision, "after the other connection's delete").to.equal(0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('gives again the revisions and offsets of a batch that rolled back as a whole', async () => {
    const file = freshFile();
    const log = openSqliteLog({ file, shared: true, clock: () => 100 });
    // Another connection makes any commit that records an offset for workspace "poison" fail as a
    // whole, at the end of the batch, once its appends have run.
    const other = new Database(file);
    other.exec("CREATE TRIGGER poison BEFORE INSERT ON workspace_offsets WHEN NEW.workspace_id = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned'); END");
    other.close();
    try {
      await log.append('ticket-1', [newEvent()], 'no_stream');
      const failed = await Promise.allSettled([log.append('ticket-1', [newEvent()], 0), log.append('ticket-2', [newEvent('poison')], 'no_stream')]);
      expect(failed.map((outcome) => outcome.status)).to.deep.equal(['rejected', 'rejected']);
      const { nextRevision, records } = await log.append('ticket-1', [newEvent()], 0);
      expect([nextRevision, records[0]?.offset]).to.deep.equal([1, 101]);
      expect(await rejection(log.append('ticket-1', [newEvent()], 2))).to.be.instanceOf(WrongExpectedRevision);
    } finally {
      await log.close();
    }
  });

  it('starts a deleted stream again at revision 0, also after an append in the same batch as the delete', async () => {
    const log = openSqliteLog({ file: freshFile() });
    try {
      await log.append('ticket-1', [newEvent(), newEvent()], 'no_stream');
      const [, , again] = await Promise.all([log.append('ticket-1', [newEvent()], 1), log.deleteStream('ticket-1'), log.append('ticket-1', [newEvent()], 'no_stream')]);
      // The append and the delete share the second transaction; the append called after the delete waits for it to end.
      expect(log.stats().transactions).to.equal(3);
      expect(again.nextRevision).to.equal(0);
      expect(await rejection(log.append('ticket-1', [newEvent()], 2)), 'the revisions before the delete are gone').to.be.instanceOf(WrongExpectedRevision);
      expect((await log.readStream('ticket-1')).map((r) => r.revision)).to.deep.equal([0]);
    } finally {
      await log.close();
    }
  });
});
