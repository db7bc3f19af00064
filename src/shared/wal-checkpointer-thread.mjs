// The WAL checkpointer's thread (src/shared/wal-checkpointer.ts). Plain JavaScript, so a thread starts
// without tsx's loader (tens of milliseconds, not hundreds): it only opens a connection and checkpoints.
import { closeSync, openSync, readSync } from 'node:fs';
import { endianness } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import Database from 'better-sqlite3';

/** Passes in a row while writers keep adding frames: the last one must find nothing left to copy. */
const PASSES = 4;
/**
 * The WAL-index header (https://www.sqlite.org/walformat.html, "The WAL-Index Format"): mxFrame, the
 * last valid frame, at byte 16, the WAL's first salt, which changes each time the WAL starts over, at
 * byte 32, and nBackfill, the frames already copied, at byte 96, all 32-bit in the machine's byte
 * order. Read from the -shm file, they tell the frames a checkpoint would copy.
 */
const HEADER_BYTES = 100;
const MX_FRAME = 16;
const SALT = 32;
const N_BACKFILL = 96;
const u32 = endianness() === 'LE' ? (at) => header.readUInt32LE(at) : (at) => header.readUInt32BE(at);

const { file, everyMs, afterFrames } = workerData;
// No busy timeout: a checkpoint that meets another in progress (a writer's own) skips this turn.
const db = new Database(file, { fileMustExist: true, timeout: 0 });
// A first read maps the WAL index: the -shm file exists from then on.
db.pragma('schema_version');
const shm = openSync(`${file}-shm`, 'r');
const header = Buffer.alloc(HEADER_BYTES);
/** Questions asked since the last pass that copied everything: answered after the next one. */
let asked = [];
let warned = false;
/** Since a checkpoint began, until the WAL starts over: every turn copies what came meanwhile. */
let draining = false;
let salt = 0;

const checkpoint = () => {
  try {
    // A torn read (a header being rewritten) only moves the decision a turn.
    readSync(shm, header, 0, HEADER_BYTES, 0);
    const waiting = u32(MX_FRAME) - u32(N_BACKFILL);
    if (u32(SALT) !== salt) draining = false;
    salt = u32(SALT);
    // A checkpoint begins once `afterFrames` frames wait, not every turn: a page that every commit
    // touches (index pages) is copied and fsynced once per round, not once per turn. The WAL starts
    // over only when a writer begins with every frame copied, so until then each turn copies what
    // came meanwhile (little), rather than let the writers' own threshold be reached.
    if (asked.length === 0 && (draining ? waiting === 0 : waiting < afterFrames)) return;
    draining = true;
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
  closeSync(shm);
  db.close();
  parentPort.close();
});
