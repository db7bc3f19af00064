// Checkpoints a SQLite WAL database from a thread of its own. SQLite checkpoints automatically on the
// connection whose commit crossed wal_autocheckpoint, inside that commit: on the main thread, where
// the log and the read models commit, a checkpoint of tens of MB (copy, then an fsync of the WAL and
// of the database) stopped every request for 150-250 ms. This thread's connection checkpoints once
// `afterFrames` frames wait to be copied (it looks every `everyMs`), PASSIVE (it never holds the
// writers' lock or waits for readers), so the WAL starts over long before the writers' threshold.
// Not every turn: a page that every commit touches would be copied (and fsynced) again each time;
// measured, that doubled the bytes written per request and slowed the commits' own fsyncs. The
// writers keep their automatic checkpoint as the bound: a thread that lags or dies leaves the WAL as
// large as without it. A crash at any moment loses nothing committed: a checkpoint copies only committed
// frames, and SQLite keeps the WAL until the database holds them (the next open replays it).
// The database must not be in exclusive locking mode (the thread's connection would be refused).
import { statSync } from 'node:fs';
import { Worker } from 'node:worker_threads';

export interface WalCheckpointer {
  /** Stops the thread and closes its connection (before the writers' connection closes, so the last one checkpoints and removes the WAL). */
  stop(): Promise<void>;
  /** Resolves after a checkpoint begun after the call copied every committed page into the file, with the WAL's frames then (tests). */
  caughtUp(): Promise<number>;
  /** The thread itself (tests end it abruptly). */
  readonly thread: Worker;
}

export interface WalCheckpointerOptions {
  /** Frames waiting to be copied that start a checkpoint: a fraction of the writers' wal_autocheckpoint. */
  readonly afterFrames: number;
  /** How often the thread looks (default 100 ms). */
  readonly everyMs?: number;
}

export const startWalCheckpointer = (file: string, options: WalCheckpointerOptions): WalCheckpointer => {
  const workerData = { file, afterFrames: options.afterFrames, everyMs: options.everyMs ?? 100 };
  // No execArgv: the parent's --import tsx would load tsx into this thread too (some 200 ms of CPU).
  const thread = new Worker(new URL('./wal-checkpointer-thread.mjs', import.meta.url), { workerData, execArgv: [] });
  // Never keeps the process alive, nor stops it: without this thread the writers' own checkpoints go on.
  thread.unref();
  const waiting = new Map<number, (frames: number) => void>();
  let asked = 0;
  thread.on('message', (message: { answers: number[]; frames: number } | { failed: string }) => {
    if ('failed' in message) return console.error(`WAL checkpointer of ${file}: ${message.failed} (the writers' own checkpoints go on)`);
    for (const n of message.answers) {
      waiting.get(n)?.(message.frames);
      waiting.delete(n);
    }
  });
  thread.on('error', (error) => console.error(`WAL checkpointer of ${file} stopped (the writers' own checkpoints go on):`, error));
  const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
  return {
    thread,
    caughtUp: () =>
      new Promise((resolve) => {
        waiting.set(++asked, resolve);
        thread.postMessage({ ask: asked });
      }),
    async stop() {
      // Referenced again, so that the process waits for its exit.
      thread.ref();
      thread.postMessage('stop');
      await exited;
    },
  };
};

export interface OnDemandCheckpointer {
  /** After each commit of the writers' connection: starts the thread once the WAL has grown to half the first checkpoint's size. */
  committed(): void;
  /** Starts the thread if need be, then as WalCheckpointer.caughtUp (tests). */
  caughtUp(): Promise<number>;
  stop(): Promise<void>;
}

/**
 * A checkpointer whose thread starts only once the WAL nears its first checkpoint: a database that
 * never gets there (a short run, most test servers) pays no thread. The WAL file keeps its largest
 * size, so a look is one stat per commit until then, and nothing after.
 */
export const walCheckpointerOnDemand = (file: string, options: WalCheckpointerOptions & { readonly pageBytes: number }): OnDemandCheckpointer => {
  let started: WalCheckpointer | null = null;
  const start = (): WalCheckpointer => (started ??= startWalCheckpointer(file, options));
  const startAt = (options.afterFrames * options.pageBytes) / 2;
  return {
    committed() {
      if (started !== null) return;
      try {
        if (statSync(`${file}-wal`).size >= startAt) start();
      } catch {
        // No WAL file (yet): nothing to checkpoint.
      }
    },
    caughtUp: () => start().caughtUp(),
    stop: async () => started?.stop(),
  };
};
