// Every event a readAll would return from `after` on, a page at a time, so a long log is never held
// in memory at once: for the reads that pass over a whole type once (a restart's delivery history,
// the replays' requests and ends).
import type { EventLog, ReadAllOptions, RecordedEvent } from './event-log.js';

export const eachEvent = async (log: EventLog, options: Omit<ReadAllOptions, 'limit'>, visit: (event: RecordedEvent) => void, pageSize = 10_000): Promise<void> => {
  for (let after = options.after; ; ) {
    const page = await log.readAll({ ...options, after, limit: pageSize });
    page.forEach(visit);
    const last = page.at(-1);
    if (last === undefined || page.length < pageSize) return;
    after = last.position;
  }
};
