// Who holds an idempotency claim: this process, named by machine, process id and an id of its own
// start. A retry on the same machine can then tell that the holder was killed (its process is gone,
// or the process id is now ours, after a restart) and take the claim over at once instead of waiting
// for the lease to run out. On another machine nothing can be told: the lease decides.
import { hostname } from 'node:os';
import { isAlive } from '../shared/process-alive.js';
import { randomId } from '../shared/ids.js';

const start = randomId().slice(0, 12);

/** This process as a claim's holder. */
export const thisHolder = `${hostname()}:${process.pid}:${start}`;

/** Whether the holder named is known to be gone (false when it cannot be told). */
export const holderGone = (holder: string): boolean => {
  const match = /^(.*):(\d+):([0-9a-f]+)$/.exec(holder);
  if (match === null || match[1] !== hostname()) return false;
  const pid = Number(match[2]);
  return pid === process.pid ? match[3] !== start : !isAlive(pid);
};
