// "What the log holds now", shared fairly: a caller gets a head position read that started after its
// call, so anything committed before the call (by any process) is at or below it. Callers arriving
// while a read is under way share the next one, so a busy server reads the head once per round trip
// rather than once per request.
import type { EventLog } from '../log/event-log.js';

export type HeadWatch = () => Promise<number>;

export const createHeadWatch = (log: EventLog): HeadWatch => {
  let running: Promise<number> | null = null;
  let next: Promise<number> | null = null;

  const read = (): Promise<number> => {
    const current = log.headPosition().finally(() => {
      running = null;
    });
    running = current;
    return current;
  };

  return () => {
    if (running === null) return read();
    // The read under way may have started before this call: wait for the one after it.
    next ??= running.then(
      () => {
        next = null;
        return read();
      },
      () => {
        next = null;
        return read();
      },
    );
    return next;
  };
};
