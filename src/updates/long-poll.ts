// Long polls over the feed. A waiting poll costs a timer and a Notifier listener, nothing else: it
// re-reads the feed only when the Notifier announces growth of its workspace's feed.
import type { EventLog, RecordedEvent } from '../log/event-log.js';
import type { Notifier } from './notifier.js';
import type { UpdatesQuery } from './query.js';

export interface LongPoll {
  /** The matching events, as soon as one exists; empty at the timeout, on abort or on drain. */
  poll(workspaceId: string, query: UpdatesQuery, signal: AbortSignal): Promise<RecordedEvent[]>;
  /** Answers every waiting poll now, and every later poll without waiting (graceful shutdown). */
  drain(): void;
  /** Polls currently waiting. */
  waiting(): number;
  draining(): boolean;
}

export const createLongPoll = (log: EventLog, notifier: Notifier): LongPoll => {
  const waiters = new Set<() => void>();
  let draining = false;

  const read = (workspaceId: string, query: UpdatesQuery) =>
    log.readFeed({ workspaceId, fromOffset: query.offset, limit: query.limit, ...(query.types === undefined ? {} : { types: query.types }) });

  const wait = async (workspaceId: string, query: UpdatesQuery, signal: AbortSignal): Promise<RecordedEvent[]> => {
    let finished = false;
    let announced = false;
    let wake = (): void => {};
    const finish = () => {
      finished = true;
      wake();
    };
    // Registered BEFORE each read: an event committed after the read began is announced to us.
    const unsubscribe = notifier.subscribe(workspaceId, (offset) => {
      if (offset < query.offset) return;
      announced = true;
      wake();
    });
    const timer = setTimeout(finish, query.timeoutMs);
    signal.addEventListener('abort', finish);
    waiters.add(finish);
    try {
      for (;;) {
        announced = false;
        const events = await read(workspaceId, query);
        if (events.length > 0 || finished) return events;
        if (!announced) await new Promise<void>((resolve) => (wake = resolve));
        wake = () => {};
        if (finished) return [];
      }
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', finish);
      waiters.delete(finish);
      unsubscribe();
    }
  };

  return {
    poll: async (workspaceId, query, signal) => {
      if (draining || query.timeoutMs === 0 || signal.aborted) return read(workspaceId, query);
      return wait(workspaceId, query, signal);
    },
    drain() {
      draining = true;
      waiters.forEach((finish) => finish());
    },
    waiting: () => waiters.size,
    draining: () => draining,
  };
};
