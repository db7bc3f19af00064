// The WAL checkpointer's thread (src/shared/wal-checkpointer.ts). Plain JavaScript, so a thread starts
// without tsx's loader (tens of milliseconds, not hundreds): it only opens a connection and checkpoints.
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** Passes in a row while writers keep adding frames: the last one must find nothing left to copy. */
const PASSES = 4;

const { file, everyMs } = workerData;
// No busy timeout: a checkpoint that meets another in progress (a writer's own) skips this turn.
const db = new Database(file, { fileMustExist: true, timeout: 0 });
/** Questions asked since the last pass that copied everything: answered after the next one. */
let asked = [];
let warned = false;

const checkpoint = () => {
  try {
    for (let pass = 1; pass <= PASSES; pass++) {
      // PASSIVE: never takes the writers' lock nor waits for readers, so no write waits for it.
      const [row] = db.pragma('wal_checkpoint(PASSIVE)');
      if (row.busy === 0 && row.checkpointed === row.log) {
        if (asked.length > 0) parentPort.postMessage({ answers: asked, frames: row.log });
        asked = [];
        return;
      }
    }
  } catch (error) {
    // Busy now, or the file went away: the writers' own checkpoints still bound the WAL.
    if (error?.code !== 'SQLITE_BUSY' && !warned) {
      warned = true;
      parentPort.postMessage({ failed: String(error?.message ?? error) });
    }
  }
};

const timer = setInterval(checkpoint, everyMs);
parentPort.on('message', (message) => {
  if (message !== 'stop') return void asked.push(message.ask);
  clearInterval(timer);
  db.close();
  parentPort.close();
});
