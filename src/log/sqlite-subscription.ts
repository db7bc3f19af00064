// Catch-up then live, over a log whose reads are synchronous. A page read and the decision to wait for
// the next commit happen in one synchronous step, so no commit of this process can fall between
// "caught up" and "waiting": nothing is lost at the switch to live. Commits of other processes (shared
// mode) are noticed by polling, from a baseline taken before the subscription's first read.
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

/**
 * Other processes' commits, for shared mode: while anyone listens, polls a counter that changes when
 * another connection commits (PRAGMA data_version, a read of the shared WAL index) and notifies.
 * A listener starts before its first read, so a commit it did not see changes the counter later.
 */
export const foreignCommits = (dataVersion: () => number, commits: CommitSignal, intervalMs: number) => {
  let listeners = 0;
  let seen = 0;
  let timer: NodeJS.Timeout | undefined;
  return {
    /** Starts polling if needed; returns the function that ends this listener. */
    listen: (): (() => void) => {
      if (listeners++ === 0) {
        seen = dataVersion();
        timer = setInterval(() => {
          const version = dataVersion();
          if (version === seen) return;
          seen = version;
          commits.notify();
        }, intervalMs);
      }
      let listening = true;
      return () => {
        if (!listening) return;
        listening = false;
        if (--listeners === 0) clearInterval(timer);
      };
    },
  };
};

export interface Page<T extends { readonly position: number } = RecordedEvent> {
  readonly events: readonly T[];
  /** Every event at or below this position has been considered (returned or filtered out). */
  readonly scannedTo: number;
}

export const subscribeLoop = <T extends { readonly position: number }>(
  after: number,
  readPage: (after: number) => Page<T>,
  commits: CommitSignal,
  handler: (event: T) => Promise<void> | void,
  scanned?: (position: number) => void,
): LogSubscription => {
  let stopped = false;
  // The wait under way, ended by the next commit or by stop. A wait of its own each time: racing each
  // commit against one promise that lives as long as the subscription would leave a reaction on it per
  // wait, which is how an idle-then-busy subscription once grew by ~90,000 promises in five minutes.
  let wake: (() => void) | null = null;

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
      if (page.scannedTo > cursor && !stopped) {
        cursor = page.scannedTo;
        scanned?.(cursor);
      }
      // Nothing was awaited since the loop's check (the page was empty), so stop has not come meanwhile.
      if (nextCommit) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          void nextCommit.then(resolve);
        });
        wake = null;
      }
      // Let I/O and timers run between pages of a long catch-up.
      else await nextTurn();
    }
  };

  const done = run();
  return {
    done,
    stop: async () => {
      stopped = true;
      wake?.();
      await done.catch(() => undefined);
    },
  };
};
