// A thread's own scheduling priority and name (Linux: a thread has a nice value and a name of its own,
// reached through /proc/thread-self). Priority: for work that may lag without harm, so that on a busy
// machine the threads sending webhooks get the cores first. Name: what `ps -L`, `top -H` and
// /proc/PID/task/TID/comm show for it, so an operator sees which thread uses the CPU. Elsewhere (no
// /proc) neither changes anything.
import { readlinkSync, writeFileSync } from 'node:fs';
import { setPriority } from 'node:os';

/** The calling thread's kernel id, or null where there is no /proc. */
export const kernelThreadId = (): number | null => {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    return Number.isSafeInteger(tid) ? tid : null;
  } catch {
    return null;
  }
};

/** `nice` from 1 (a little) to 19 (only when nothing else runs); says whether it took effect. */
export const lowerThreadPriority = (nice: number): boolean => {
  const tid = kernelThreadId();
  if (tid === null) return false;
  try {
    setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
};

/** Names the calling thread (the kernel keeps 15 bytes); says whether it took effect. */
export const nameThread = (name: string): boolean => {
  try {
    writeFileSync('/proc/thread-self/comm', name.slice(0, 15));
    return true;
  } catch {
    return false;
  }
};
