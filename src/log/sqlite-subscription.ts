// Catch-up then live, over a log whose reads are synchronous and whose commits happen in this process.
// A page read and the decision to wait for the next commit happen in one synchronous step, so no
// commit can fall between "caught up" and "waiting": nothing is lost at the switch to live.
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { LogSubscription, RecordedEvent } from './event-log.js';

export interface CommitSignal {
  /** Resolves at the next commit. */
  next(): Promise<void>;
  notify(): void;
}

export const commitSignal = (): CommitSignal => {
  let wake = (): void => {};
  let next = new Promise<void>((resolve) => (wake = resolve));
  return {
    next: () => next,
    notify: () => {
      const woken = wake;
      next = new Promise<void>((resolve) => (wake = resolve));
      woken();
    },
  };
};

export interface Page {
  readonly events: readonly RecordedEvent[];
  /** Every event at or below this position has been considered (returned or filtered out). */
  readonly scannedTo: number;
}

export const subscribeLoop = (
  after: number,
  readPage: (after: number) => Page,
  commits: CommitSignal,
  handler: (event: RecordedEvent) => Promise<void> | void,
): LogSubscription => {
  let stopped = false;
  let wakeStop = (): void => {};
  const stopSignal = new Promise<void>((resolve) => (wakeStop = resolve));

  const run = async (): Promise<void> => {
    let cursor = after;
    while (!stopped) {
      const page = readPage(cursor);
      const nextCommit = page.events.length === 0 ? commits.next() : undefined;
      for (const event of page.events) {
        if (stopped) return;
        await handler(event);
        cursor = event.position;
      }
      cursor = Math.max(cursor, page.scannedTo);
      if (nextCommit) await Promise.race([nextCommit, stopSignal]);
      // Let I/O and timers run between pages of a long catch-up.
      else await nextTurn();
    }
  };

  const done = run();
  return {
    done,
    stop: async () => {
      stopped = true;
      wakeStop();
      await done.catch(() => undefined);
    },
  };
};
