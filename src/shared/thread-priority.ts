// Lowers the calling thread's scheduling priority (Linux: a thread has a nice value of its own, set
// with its kernel thread id, which /proc/thread-self names). For work that may lag without harm, so
// that on a busy machine the threads answering requests and sending webhooks get the cores first.
// Elsewhere (no /proc) it changes nothing.
import { readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';

/** `nice` from 1 (a little) to 19 (only when nothing else runs); says whether it took effect. */
export const lowerThreadPriority = (nice: number): boolean => {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isSafeInteger(tid)) return false;
    setPriority(tid, nice);
    return true;
  } catch {
    return false;
  }
};
