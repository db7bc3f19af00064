// The delivery-history index kept in a worker thread of the thread that sends the attempts (the
// embedded delivery thread, or a distributed dispatcher's main thread): reading the delivery records
// back from the log and writing them into the index costs about as much as sending the attempts, and
// none of it is on the way from a commit to its first attempt. The two threads live and die together:
// the index thread ends with its parent, and the parent treats the index thread's death as its own.
// The parent reads the index on a connection of its own; `appliedThrough` tells it when what it needs
// is committed, `pending` reads what a restart takes over once the index has caught up with the log.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { IndexedDelivery, PendingPages } from '../../../projections/deliveries-index.js';
import type { Config } from '../../config/config.js';
import { startWorker } from '../../shared/worker.js';

/** What a restart takes over, handed over a page at a time as it is iterated, and how many delivery records the thread applied since it started to get there. */
export type TakenOver = PendingPages & { readonly applied: number };

/** A page of what a restart takes over, as the index thread hands it over. */
export interface TakeOverPage {
  /** The read it belongs to: its next page is asked for by it. */
  readonly read: number;
  readonly deliveries: readonly IndexedDelivery[];
  /** False once the read is done (this page is then empty). */
  readonly more: boolean;
  readonly fannedOutThrough: number;
  readonly applied: number;
}

/** Parent (the thread that sends) → index thread. */
export type ToIndexer =
  | { readonly kind: 'sync'; readonly id: number; readonly position: number }
  /** Starts a read of what a restart takes over; answered with its first page. */
  | { readonly kind: 'pending'; readonly id: number }
  | { readonly kind: 'page'; readonly id: number; readonly read: number }
  /** The parent stopped reading before the end. */
  | { readonly kind: 'drop'; readonly read: number }
  | { readonly kind: 'forget'; readonly id: number; readonly subscriptionId: string }
  | { readonly kind: 'heap'; readonly id: number }
  | { readonly kind: 'stop' };
/** Index thread → parent; every answer carries the thread's heap in use. */
export type FromIndexer =
  | { readonly kind: 'ready' }
  | { readonly kind: 'done'; readonly id: number; readonly heapUsedBytes: number; readonly page?: TakeOverPage }
  | { readonly kind: 'failed'; readonly id: number; readonly message: string };
type Done = Extract<FromIndexer, { kind: 'done' }>;

export interface HistoryIndexThread {
  /** Resolves once the index has applied and committed every event of the log up to `position`. */
  appliedThrough(position: number): Promise<void>;
  /**
   * What waits, read once the index has applied everything the log has now (rebuilt first if it lost
   * its data), handed over a page at a time: the thread reads the next page while the parent takes
   * this one, and no further. A delivery may come twice (the read starts again should the index be
   * rebuilt meanwhile).
   */
  pending(): Promise<TakenOver>;
  /** Drops a deleted subscription's history; resolves once that is committed. */
  forget(subscriptionId: string): Promise<void>;
  /** The thread's heap in use. */
  heapUsedBytes(): Promise<number>;
  /** Ends the thread abruptly, as a crash would (tests). */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

const ENTRY = new URL(`./index-thread-entry${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

/**
 * Starts the index thread; resolves once it has caught up with the log from the index's checkpoint
 * (a shared index: once it applies the log or stands by; its answers wait for the index to catch up).
 * `died` hears of a thread that ends other than by `stop` (its requests under way fail too).
 */
export const startHistoryIndexThread = (config: Config, died: (error: Error) => void): Promise<HistoryIndexThread> =>
  new Promise((resolve, reject) => {
    const worker = startWorker(ENTRY, { workerData: { config }, name: 'webhook-history-index' });
    const waiting = new Map<number, { readonly done: (answer: Done) => void; readonly fail: (error: Error) => void }>();
    let requests = 0;
    let ready = false;
    let stopping = false;
    let failure: Error | null = null;
    let exited: () => void = () => undefined;
    const gone = new Promise<void>((done) => (exited = done));

    const ask = (message: (id: number) => ToIndexer): Promise<Done> =>
      new Promise((done, fail) => {
        if (failure !== null) return fail(failure);
        const id = ++requests;
        waiting.set(id, { done, fail });
        worker.postMessage(message(id));
      });

    worker.on('message', (message: FromIndexer) => {
      if (message.kind === 'ready') {
        ready = true;
        return resolve(thread);
      }
      const request = waiting.get(message.id);
      waiting.delete(message.id);
      if (message.kind === 'done') request?.done(message);
      else request?.fail(new Error(`delivery history index: ${message.message}`));
    });
    worker.on('error', (error) => {
      failure = error;
    });
    worker.on('exit', (code) => {
      failure ??= new Error(`delivery history index thread exited with code ${code}`);
      for (const request of waiting.values()) request.fail(failure);
      waiting.clear();
      exited();
      if (!ready) reject(failure);
      else if (!stopping) died(failure);
    });

    const pageOf = ({ page }: Done): TakeOverPage => {
      if (page === undefined) throw new Error('delivery history index: the thread answered without the page it was asked for');
      return page;
    };
    /** A read's deliveries from its first page on, the next page asked for as each one is taken. */
    const pages = async function* (first: TakeOverPage): AsyncGenerator<IndexedDelivery> {
      let page = first;
      try {
        while (page.more) {
          const next = ask((id) => ({ kind: 'page', id, read: page.read }));
          // Awaited once this page is taken; a failure meanwhile is not an unhandled rejection.
          next.catch(() => undefined);
          yield* page.deliveries;
          page = pageOf(await next);
        }
      } finally {
        // Left before the end: the thread lets the read go.
        if (page.more && failure === null) worker.postMessage({ kind: 'drop', read: page.read } satisfies ToIndexer);
      }
    };

    const thread: HistoryIndexThread = {
      appliedThrough: async (position) => void (await ask((id) => ({ kind: 'sync', id, position }))),
      async pending() {
        const first = pageOf(await ask((id) => ({ kind: 'pending', id })));
        const { fannedOutThrough, applied } = first;
        return { deliveries: pages(first), fannedOutThrough, applied };
      },
      forget: async (subscriptionId) => void (await ask((id) => ({ kind: 'forget', id, subscriptionId }))),
      heapUsedBytes: async () => (await ask((id) => ({ kind: 'heap', id }))).heapUsedBytes,
      async kill() {
        await worker.terminate();
      },
      async stop() {
        stopping = true;
        worker.postMessage({ kind: 'stop' } satisfies ToIndexer);
        await gone;
      },
    };
  });
