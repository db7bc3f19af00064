// The stream-delete bench's deleter, in a thread of its own with its own connection, as the dispatcher
// thread deletes a webhook's history: `statement` runs the one DELETE that deleteStream was (the
// ceiling), `log` runs deleteStream. Posts the time the deletion took, in ms.
import { parentPort, workerData } from 'node:worker_threads';
import { openLogDatabase } from '../../src/log/sqlite-open.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

export interface DeleterData {
  readonly file: string;
  readonly stream: string;
  readonly mode: 'statement' | 'log';
}

const { file, stream, mode } = workerData as DeleterData;
const started = performance.now();
if (mode === 'statement') {
  const db = openLogDatabase(file, { shared: true, busyTimeoutMs: 5000, durability: 'relaxed' });
  db.prepare('DELETE FROM events WHERE stream = ?').run(stream);
  db.close();
} else {
  const log = openSqliteLog({ file, shared: true, durability: 'relaxed' });
  await log.deleteStream(stream);
  await log.close();
}
parentPort?.postMessage(performance.now() - started);
