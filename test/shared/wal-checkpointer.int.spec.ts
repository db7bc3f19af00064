import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { startWalCheckpointer, walCheckpointerOnDemand } from '../../src/shared/wal-checkpointer.js';

const PAGE = 4096;

describe('WAL checkpointer thread', () => {
  const folder = mkdtempSync(path.join(tmpdir(), 'sp-wal-checkpointer-'));
  after(() => rmSync(folder, { recursive: true, force: true }));
  let files = 0;

  /** A writer in WAL mode whose own automatic checkpoint runs every `autocheckpoint` pages (0: never). */
  const writer = (autocheckpoint: number) => {
    const file = path.join(folder, `db-${++files}.sqlite`);
    const db = new Database(file);
    db.pragma(`page_size = ${PAGE}`);
    db.pragma('journal_mode = WAL');
    db.pragma(`wal_autocheckpoint = ${autocheckpoint}`);
    db.exec('CREATE TABLE rows (n INTEGER PRIMARY KEY, payload TEXT NOT NULL)');
    const insert = db.prepare('INSERT INTO rows (payload) VALUES (?)');
    // One commit per row of about a page: each adds a frame or two to the WAL.
    const write = (rows: number) => {
      for (let i = 0; i < rows; i++) insert.run('x'.repeat(PAGE - 200));
    };
    const walBytes = () => statSync(`${file}-wal`).size;
    return { file, db, write, walBytes };
  };

  it('copies what the writer commits into the database file once enough waits, so the WAL starts over instead of growing', async () => {
    const { file, db, write, walBytes } = writer(0);
    const checkpointer = startWalCheckpointer(file, { afterFrames: 200, everyMs: 5 });
    try {
      write(300);
      // Unasked: the thread saw more than 200 frames waiting.
      while (statSync(file).size < 300 * PAGE) await new Promise((resolve) => setTimeout(resolve, 5));
      await checkpointer.caughtUp();
      const afterFirst = walBytes();
      for (let round = 0; round < 4; round++) {
        write(300);
        await checkpointer.caughtUp();
      }
      // Without the thread (and no automatic checkpoint) it would hold all 1,500 rows' frames.
      expect(walBytes()).to.be.at.most(afterFirst * 1.5);
      expect(db.prepare('SELECT count(*) FROM rows').pluck().get()).to.equal(1_500);
    } finally {
      await checkpointer.stop();
      db.close();
    }
  });

  it('on demand, starts its thread once the WAL nears the first checkpoint, and stops at once when it never did', async () => {
    const idle = writer(0);
    const never = walCheckpointerOnDemand(idle.file, { afterFrames: 200, pageBytes: PAGE, everyMs: 5 });
    idle.write(10);
    never.committed();
    await never.stop();
    idle.db.close();

    const { file, db, write } = writer(0);
    const onDemand = walCheckpointerOnDemand(file, { afterFrames: 200, pageBytes: PAGE, everyMs: 5 });
    try {
      for (let i = 0; i < 300; i++) {
        write(1);
        onDemand.committed();
      }
      // Unasked: the thread it started saw more than 200 frames waiting.
      while (statSync(file).size < 300 * PAGE) await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      await onDemand.stop();
      db.close();
    }
  });

  it('ended abruptly while it checkpoints, leaves the WAL bounded by the writer\'s own checkpoint, and loses nothing', async () => {
    const { file, db, write, walBytes } = writer(100);
    const checkpointer = startWalCheckpointer(file, { afterFrames: 50, everyMs: 1 });
    write(500);
    await checkpointer.caughtUp();
    write(500);
    await checkpointer.thread.terminate();
    // The file keeps its largest size: once the writer checkpoints alone it grows by one commit at most
    // (the first, appended before its checkpoint lets the next one start the WAL over).
    const atEnd = Math.max(walBytes(), 120 * (PAGE + 24) + 32);
    write(1_000);
    expect(walBytes()).to.be.at.most(atEnd + 4 * (PAGE + 24));
    await checkpointer.stop();
    db.close();
    const again = new Database(file);
    expect(again.prepare('SELECT count(*) FROM rows').pluck().get()).to.equal(2_000);
    again.close();
  });
});
