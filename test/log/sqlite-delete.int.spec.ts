// Deleting a long stream (a deleted webhook's delivery history) from the SQLite log: a batch a
// transaction, newest first, so that other writers are not held for all of it, readers never meet a
// stream with a gap, and the stream is empty when the deletion ends, whoever wrote to it meanwhile.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { LogUnavailable, type EventLog, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-delete-'));
const freshFile = (): string => join(dir, `${randomBytes(6).toString('hex')}.db`);
after(() => rmSync(dir, { recursive: true, force: true }));

const newEvent = (): NewEvent => ({ id: randomBytes(16).toString('hex'), type: 'delivery.recorded', workspaceId: 'ws', data: { steps: [] } });
const STREAM = 'deliveries-wh_1';
/** Events a deletion removes per transaction here; the streams below are many batches long. */
const BATCH = 10;

const fill = async (log: EventLog, events: number): Promise<void> => {
  for (let n = 0; n < events; n += 100) await log.append(STREAM, Array.from({ length: Math.min(100, events - n) }, newEvent), 'any');
};
const revisionsOf = async (log: EventLog, stream = STREAM): Promise<number[]> => (await log.readStream(stream)).map((r) => r.revision);
/** Whether `revisions` are 0, 1, ... n-1: an earlier state of a stream, with no gap. */
const isPrefix = (revisions: readonly number[]): boolean => revisions.every((revision, i) => revision === i);
/** Resolves once the stream, as `log` reads it, has lost some but not all of its `events`. */
const partlyDeleted = async (log: EventLog, events: number): Promise<void> => {
  for (;;) {
    const left = (await revisionsOf(log)).length;
    if (left > 0 && left < events) return;
    if (left === 0) throw new Error('the deletion ended before it was seen under way');
    await new Promise((resolve) => setImmediate(resolve));
  }
};

describe('SQLite log: deleting a long stream (integration)', () => {
  it('deletes a batch a transaction, newest first: a reader meanwhile meets earlier states of the stream, never a gap', async () => {
    const file = freshFile();
    const [log, reader] = [openSqliteLog({ file, shared: true, deleteBatch: BATCH }), openSqliteLog({ file, shared: true })];
    try {
      await fill(log, 300);
      const before = log.stats().transactions;
      let ended = false;
      const deletion = log.deleteStream(STREAM).then(() => (ended = true));
      const seen: number[][] = [];
      while (!ended) {
        seen.push(await revisionsOf(reader));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      await deletion;
      expect(await revisionsOf(reader)).to.deep.equal([]);
      expect(log.stats().transactions - before, 'a transaction a batch').to.be.at.least(300 / BATCH);
      expect(seen.filter((revisions) => !isPrefix(revisions)), 'reads that met a gap').to.deep.equal([]);
      expect(seen.some((revisions) => revisions.length > 0 && revisions.length < 300), 'a read met the deletion under way').to.equal(true);
    } finally {
      await Promise.all([log.close(), reader.close()]);
    }
  });

  it("lets another connection's writes commit while it is under way", async () => {
    const file = freshFile();
    const [log, other] = [openSqliteLog({ file, shared: true, deleteBatch: BATCH }), openSqliteLog({ file, shared: true, busyTimeoutMs: 5000 })];
    try {
      await fill(log, 1000);
      let ended = false;
      const deletion = log.deleteStream(STREAM).then(() => (ended = true));
      await partlyDeleted(other, 1000);
      const { records } = await other.append('ticket-1', [newEvent()], 'no_stream');
      expect(ended, 'the deletion had ended before the append committed').to.equal(false);
      await deletion;
      expect((await other.readStream('ticket-1')).map((r) => r.id)).to.deep.equal(records.map((r) => r.id));
    } finally {
      await Promise.all([log.close(), other.close()]);
    }
  });

  it('ends with the stream empty: what another connection appended to it meanwhile goes too, and the next append is revision 0', async () => {
    const file = freshFile();
    const [log, other] = [openSqliteLog({ file, shared: true, deleteBatch: BATCH }), openSqliteLog({ file, shared: true })];
    try {
      await fill(log, 500);
      const deletion = log.deleteStream(STREAM);
      await partlyDeleted(other, 500);
      const late = await other.append(STREAM, [newEvent()], 'any');
      expect(late.nextRevision, 'appended on what was left').to.be.greaterThan(0);
      await deletion;
      expect(await revisionsOf(other)).to.deep.equal([]);
      expect((await other.append(STREAM, [newEvent()], 'no_stream')).nextRevision).to.equal(0);
    } finally {
      await Promise.all([log.close(), other.close()]);
    }
  });

  it('ends for each of two connections deleting the stream at once, with the stream empty', async () => {
    const file = freshFile();
    const [a, b] = [openSqliteLog({ file, shared: true, deleteBatch: BATCH }), openSqliteLog({ file, shared: true, deleteBatch: BATCH })];
    try {
      await fill(a, 500);
      const before = a.stats().transactions + b.stats().transactions;
      await Promise.all([a.deleteStream(STREAM), b.deleteStream(STREAM)]);
      expect(await revisionsOf(a)).to.deep.equal([]);
      expect(a.stats().transactions + b.stats().transactions - before, 'each batch once, and one empty batch each at most').to.be.within(500 / BATCH, 500 / BATCH + 2);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('holds back an append of its own connection to the stream called meanwhile until it ends: the append is revision 0', async () => {
    const log = openSqliteLog({ file: freshFile(), deleteBatch: BATCH });
    try {
      await fill(log, 300);
      const [, again, elsewhere] = await Promise.all([log.deleteStream(STREAM), log.append(STREAM, [newEvent()], 'no_stream'), log.append('ticket-1', [newEvent()], 'no_stream')]);
      expect(again.nextRevision).to.equal(0);
      expect(await revisionsOf(log)).to.deep.equal([0]);
      expect(elsewhere.nextRevision, 'an append to another stream is not held').to.equal(0);
      expect((elsewhere.records[0]?.position ?? 0) < (again.records[0]?.position ?? 0), 'the other stream committed first').to.equal(true);
    } finally {
      await log.close();
    }
  });

  it('is stopped by a close between batches, with the appends it held back, leaving an earlier state of the stream that a later delete ends', async () => {
    const file = freshFile();
    const log = openSqliteLog({ file, shared: true, deleteBatch: BATCH });
    await fill(log, 500);
    const deletion = log.deleteStream(STREAM).then(() => null, (error: unknown) => error);
    await partlyDeleted(log, 500);
    // Held back by the deletion, then refused as any call after the close.
    const append = log.append(STREAM, [newEvent()], 'any').then(() => null, (error: unknown) => error);
    await log.close();
    expect(await deletion).to.be.instanceOf(LogUnavailable);
    expect(await append).to.be.instanceOf(LogUnavailable);
    const reopened = openSqliteLog({ file, shared: true, deleteBatch: BATCH });
    try {
      const left = await revisionsOf(reopened);
      expect(left.length).to.be.within(1, 499);
      expect(isPrefix(left), 'what is left has no gap').to.equal(true);
      await reopened.deleteStream(STREAM);
      expect(await revisionsOf(reopened)).to.deep.equal([]);
    } finally {
      await reopened.close();
    }
  });
});
