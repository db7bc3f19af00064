// Worker threads started by a small thread of their own (thread-launcher-thread.mjs) instead of by the
// calling thread. Linux gives a new thread the nice value of the thread that creates it: the embedded
// service's main thread lowers its priority once it is up (API_THREAD_NICE), so a delivery thread it
// started again after a crash would inherit that lower priority for good (only a privileged process may
// raise it back). Started from the launcher, created before that, it runs at the process's priority.
// The launched worker looks like a Worker to its owner: messages, errors and its exit are relayed.
import { EventEmitter } from 'node:events';
import { Worker } from 'node:worker_threads';
import { startWorker, workerArgs } from './worker.js';

/** What an owner uses of a worker thread; a `Worker` is one too. */
export interface LaunchedWorker {
  /** The worker's `threadId`; -1 until the launcher has created it. */
  readonly threadId: number;
  postMessage(message: unknown): void;
  terminate(): Promise<unknown>;
  /** 'message' (what the worker posted), 'error' (what it threw), 'exit' (its exit code), as a Worker's. */
  on(event: 'message' | 'error' | 'exit', listener: (value: any) => void): this;
}

export interface ThreadLauncher {
  /** Starts `entry` (as `startWorker` would) from the launcher's thread. */
  start(entry: URL, options: { readonly workerData: object; readonly name: string }): LaunchedWorker;
  /** Ends the launcher's thread (its workers with it). */
  close(): Promise<void>;
}

type FromLauncher =
  | { readonly id: number; readonly kind: 'started'; readonly threadId: number }
  | { readonly id: number; readonly kind: 'message'; readonly payload: unknown }
  | { readonly id: number; readonly kind: 'error'; readonly error: { readonly name: string; readonly message: string; readonly stack?: string } }
  | { readonly id: number; readonly kind: 'exit'; readonly code: number };

class Launched extends EventEmitter implements LaunchedWorker {
  threadId = -1;
  private readonly exited: Promise<void>;

  constructor(
    private readonly send: (message: object) => void,
    readonly id: number,
  ) {
    super();
    this.exited = new Promise((resolve) => this.once('exit', () => resolve()));
  }

  postMessage(payload: unknown): void {
    this.send({ kind: 'post', id: this.id, payload });
  }

  terminate(): Promise<void> {
    this.send({ kind: 'terminate', id: this.id });
    return this.exited;
  }
}

/** Creates the launcher's thread now: call it before the calling thread lowers its own priority. */
export const createThreadLauncher = (): ThreadLauncher => {
  // No execArgv: the parent's --import tsx would load tsx into this thread for nothing.
  const thread = new Worker(new URL('./thread-launcher-thread.mjs', import.meta.url), { execArgv: [], name: 'thread-launcher' });
  // Holds the process only while a worker it started runs, as that worker would on its own.
  thread.unref();
  const running = new Map<number, Launched>();
  let ids = 0;
  let gone = false;
  const send = (message: object) => thread.postMessage(message);

  thread.on('message', (message: FromLauncher) => {
    const worker = running.get(message.id);
    if (worker === undefined) return;
    switch (message.kind) {
      case 'started':
        worker.threadId = message.threadId;
        return;
      case 'message':
        worker.emit('message', message.payload);
        return;
      case 'error': {
        const { name, message: text, stack } = message.error;
        worker.emit('error', Object.assign(new Error(text), { name }, stack === undefined ? {} : { stack }));
        return;
      }
      case 'exit':
        running.delete(message.id);
        if (running.size === 0) thread.unref();
        worker.emit('exit', message.code);
    }
  });
  thread.on('error', (error) => console.error('thread launcher failed (threads start from the calling thread from now on):', error));
  thread.on('exit', () => {
    gone = true;
    // Its workers ended with it; their owners learn it as from a worker's own death.
    for (const worker of running.values()) worker.emit('exit', 1);
    running.clear();
  });

  return {
    start(entry, options) {
      // Without the launcher the worker still starts, at the calling thread's priority.
      if (gone) return startWorker(entry, options);
      const [url, workerOptions] = workerArgs(entry, { ...options, execArgv: process.execArgv });
      const worker = new Launched(send, ++ids);
      running.set(worker.id, worker);
      thread.ref();
      send({ kind: 'start', id: worker.id, url: url.href, options: workerOptions });
      return worker;
    },
    async close() {
      await thread.terminate();
    },
  };
};
