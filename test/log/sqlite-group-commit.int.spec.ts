// The group commit's gathering, on a real SQLite file: writes that come a few a turn wait for each
// other (one connection per request brings about one a turn), for no longer than the last batch
// cost apart from its writes; a write alone or a full batch is not held. Turns are counted with a
// setImmediate chain, so what these cases assert does not depend on how fast the machine is, except
// the last one's bound.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { GATHER_WRITES, groupCommit, type GroupCommit } from '../../src/log/sqlite-group-commit.js';

const dir = mkdtempSync(join(tmpdir(), 'group-commit-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const spin = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

/** A writer on a fresh WAL file whose batches cost at least `commitMs` apart from their writes (spun before each commit). */
const writerOn = (name: string, commitMs: number): { readonly writer: GroupCommit; readonly write: (n: number) => Promise<number>; readonly close: () => void } => {
  const db = new Database(join(dir, `${name}.db`));
  db.pragma('journal_mode = WAL');
  db.exec('CREATE TABLE t (n INTEGER)');
  const insert = db.prepare('INSERT INTO t (n) VALUES (?)');
  const writer = groupCommit(db, { begin: () => {}, beforeCommit: () => spin(commitMs), afterCommit: () => {}, afterRollback: () => {} });
  return { writer, write: (n) => writer.submit(() => Number(insert.run(n).lastInsertRowid)), close: () => db.close() };
};

/** Counts the loop's turns from now: `turns()` is how many have begun since. */
const turnCounter = (): { readonly turns: () => number; readonly stop: () => void } => {
  let turns = 0;
  let timer = setImmediate(function tick() {
    turns += 1;
    timer = setImmediate(tick);
  });
  return { turns: () => turns, stop: () => clearImmediate(timer) };
};

describe('SQLite group commit: gathering writes that come a few a turn', () => {
  it('writes that come one a turn share a commit while the last batch cost more than their turns', async () => {
    const { writer, write, close } = writerOn('one-a-turn', 5);
    try {
      await write(0);
      const before = writer.stats.transactions;
      const written: Promise<number>[] = [];
      await new Promise<void>((done) => {
        const next = (): void => {
          written.push(write(written.length + 1));
          if (written.length < 10) setImmediate(next);
          else done();
        };
        setImmediate(next);
      });
      expect(await Promise.all(written)).to.have.length(10);
      // Committed at every turn's end, they took 10 transactions.
      expect(writer.stats.transactions - before, 'transactions for 10 writes, one a turn').to.be.below(10);
    } finally {
      close();
    }
  });

  it('a write alone is committed at the end of the next turn, not after the last batch’s cost', async () => {
    const { write, close } = writerOn('alone', 5);
    try {
      await write(0);
      const counter = turnCounter();
      await write(1);
      counter.stop();
      expect(counter.turns(), 'turns until committed').to.be.at.most(2);
    } finally {
      close();
    }
  });

  it(`a batch of ${GATHER_WRITES} goes in the turn it filled`, async () => {
    const { writer, write, close } = writerOn('full', 5);
    try {
      await write(0);
      const before = writer.stats.transactions;
      const counter = turnCounter();
      await Promise.all(Array.from({ length: GATHER_WRITES }, (_, i) => write(i + 1)));
      counter.stop();
      expect(counter.turns(), 'turns until committed').to.be.at.most(1);
      expect(writer.stats.transactions - before).to.equal(1);
    } finally {
      close();
    }
  });

  it('writes that keep coming are not held until they stop: each waits about one commit at most', async () => {
    const { writer, write, close } = writerOn('steady', 2);
    try {
      await write(0);
      const before = writer.stats.transactions;
      const waits: number[] = [];
      const written: Promise<void>[] = [];
      // One write a turn for 120 turns of 1 ms each: far longer than a batch's cost (2 ms).
      await new Promise<void>((done) => {
        const next = (): void => {
          const sent = performance.now();
          written.push(write(written.length + 1).then(() => void waits.push(performance.now() - sent)));
          spin(1);
          if (written.length < 120) setImmediate(next);
          else done();
        };
        setImmediate(next);
      });
      await Promise.all(written);
      expect(writer.stats.transactions - before, 'a commit every few writes').to.be.at.least(120 / 8);
      // Each waited for its batch: the gathering (≤ 2 ms and a turn) and the commit itself; held until
      // the writes stopped, the first would have waited all 120 turns.
      expect(Math.max(...waits), 'the longest wait, ms').to.be.below(60);
    } finally {
      close();
    }
  });
});
