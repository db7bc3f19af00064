// The embedded role's delivery engine in a worker thread: the main thread's event loop serves HTTP and
// the read models, the worker's fans events out, sends the attempts and records them. Both open the
// same SQLite log (shared mode); what the main thread records for the engine (manual retries,
// deactivations, deletions) reaches it through the log, as it reaches the distributed dispatchers.
// Started last (the main side is ready), stopped first (before the log closes), started again with
// a growing delay when it dies; /readyz names it while it is not running or does not answer.
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../../config/config.js';
import type { Feature } from '../../app/core.js';
import type { HealthCheck } from '../../health/checks.js';
import type { WebhookExtension } from '../feature.js';
import type { DeliveryEngineStatus, EngineStatusSource } from './backlog.js';
import { DELETION_WAIT_MS } from './deletion-notices.js';
import { createThreadLauncher, type LaunchedWorker } from '../../shared/thread-launcher.js';
import { createBackpressureBuffer, holdingWrites, readBackpressure, sharedDeadline } from './backpressure.js';

/** Main thread → worker. */
export type ToWorker =
  | { readonly kind: 'stop' }
  /** Ends the worker's history index thread abruptly, as a crash would (tests). */
  | { readonly kind: 'kill-index' }
  /** Keeps the worker's event loop busy for `ms` (in slices, so its timers still run), as a CPU-bound engine is (tests). */
  | { readonly kind: 'busy'; readonly ms: number }
  | { readonly kind: 'ping'; readonly id: number }
  /** Answered with a pong once the worker has cancelled the subscription's attempts in flight. */
  | { readonly kind: 'deleted'; readonly subscriptionId: string; readonly id: number };
/** Worker → main thread. */
export type FromWorker = { readonly kind: 'ready' } | Pong;
/** A worker's answer: its threads' heap in use, and its delivery engine's status (null when not asked: a deletion's answer). */
export interface Pong {
  readonly kind: 'pong';
  readonly id: number;
  readonly heapUsedBytes: number;
  readonly engine: DeliveryEngineStatus | null;
}

export interface DispatcherThreadOptions {
  /** First delay before starting a dead worker again, doubled at each death in a row (default 200 ms). */
  readonly restartDelayMs?: number;
  /** The longest delay (default 10 s). */
  readonly maxRestartDelayMs?: number;
  /** A worker that ran this long before dying starts again after the first delay (default 30 s). */
  readonly healthyAfterMs?: number;
}

export interface DispatcherThread {
  readonly feature: Feature & { readonly thread: DispatcherThread };
  readonly check: HealthCheck;
  /** The running worker's thread id, null while none runs. */
  threadId(): number | null;
  /** Resolves once a worker is running (after a restart, for tests). */
  running(): Promise<void>;
  /** The worker's heap in use (its isolate's, which the process's own heap figures leave out); null while none answers. */
  heapUsedBytes(): Promise<number | null>;
  /** The worker's delivery backlog and punctuality; null while none answers. */
  readonly engine: EngineStatusSource;
  /** Ends the running worker abruptly, as a crash would (tests). */
  kill(): Promise<void>;
  /** Ends the running worker's history index thread abruptly (tests); the worker ends with it. */
  killIndex(): void;
  /** Keeps the running worker busy for `ms` (tests). */
  busy(ms: number): void;
  /**
   * The main thread's extension of the webhooks feature: a deletion its directory applies (before the
   * DELETE answers) is handed to the worker at once, which cancels the subscription's attempts in
   * flight without waiting for its own tail of the log to meet the deletion marker (which it may
   * also miss: the DELETE removes the marker with the subscription's stream a moment later).
   */
  readonly forwardDeletions: WebhookExtension;
  /**
   * The main thread's extension that holds writes of workspaces with subscriptions while the worker
   * asks for it (backpressure.ts): it adds `writeHold` to the webhooks feature.
   */
  readonly holdWrites: WebhookExtension;
}

/** The longest a metrics scrape or the backlog route waits for the worker's figures. */
const HEAP_ANSWER_MS = 1_000;
/** Longer than the health check's own timeout, which answers first. */
const HEALTH_WAIT_MS = 10_000;

// The worker runs the entry beside this file, compiled or under tsx as this file is.
const ENTRY = new URL(`./thread-entry${extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export const createDispatcherThread = (config: Config, options: DispatcherThreadOptions = {}): DispatcherThread => {
  const firstDelay = options.restartDelayMs ?? 200;
  const maxDelay = options.maxRestartDelayMs ?? 10_000;
  const healthyAfter = options.healthyAfterMs ?? 30_000;
  // Long enough for attempts under way (their timeout) and their recording.
  const stopGraceMs = 2 * config.webhooks.timeoutMs + 5_000;

  // Created now, before the main thread lowers its priority (API_THREAD_NICE): a worker started again
  // after a crash runs at the process's priority, as the first did.
  const launcher = createThreadLauncher();
  // One buffer for every worker this starts: a restarted worker signals where the first did.
  const backpressure = createBackpressureBuffer();
  const pressure = readBackpressure(sharedDeadline(backpressure));
  let worker: LaunchedWorker | null = null;
  let ready = false;
  let stopping = false;
  let deathsInARow = 0;
  let restartTimer: NodeJS.Timeout | undefined;
  let exited: Promise<void> = Promise.resolve();
  let pings = 0;
  const pongs = new Map<number, (pong: Pong) => void>();
  let waiters: (() => void)[] = [];

  /** Starts a worker; resolves when it is ready, rejects when it dies first. */
  const spawn = (): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const started = Date.now();
      const current = launcher.start(ENTRY, { workerData: { config, backpressure }, name: 'webhook-dispatcher' });
      worker = current;
      ready = false;
      let failure: unknown = null;
      let markExited = (): void => {};
      exited = new Promise<void>((done) => (markExited = done));
      current.on('message', (message: FromWorker) => {
        if (message.kind === 'ready') {
          ready = true;
          resolve();
          for (const wake of waiters) wake();
          waiters = [];
        } else pongs.get(message.id)?.(message);
      });
      current.on('error', (error) => {
        failure = error;
        console.error('webhook dispatcher thread failed:', error);
      });
      current.on('exit', (code) => {
        if (worker === current) worker = null;
        // What it held is released now rather than when its last signal runs out.
        pressure.clear();
        const wasReady = ready;
        ready = false;
        pongs.clear();
        markExited();
        if (!wasReady) reject(failure ?? new Error(`webhook dispatcher thread exited with code ${code} before it was ready`));
        if (stopping) return;
        deathsInARow = wasReady && Date.now() - started >= healthyAfter ? 1 : deathsInARow + 1;
        const delay = Math.min(maxDelay, firstDelay * 2 ** (deathsInARow - 1));
        console.error(`webhook dispatcher thread exited (code ${code}): starting it again in ${delay} ms`);
        restartTimer = setTimeout(() => {
          // A worker that fails again on its way up is counted as another death by its own exit.
          if (!stopping) spawn().catch(() => undefined);
        }, delay);
      });
    });

  const feature = {
    name: 'webhook-dispatcher-thread',
    // The first start must succeed: a worker that cannot start fails the service's start.
    start: spawn,
    async stop() {
      stopping = true;
      clearTimeout(restartTimer);
      const current = worker;
      if (current !== null) {
        current.postMessage({ kind: 'stop' } satisfies ToWorker);
        const timer = setTimeout(() => void current.terminate(), stopGraceMs);
        await exited;
        clearTimeout(timer);
      }
      await launcher.close();
    },
  };

  /**
   * Sends the worker a message under a fresh id; resolves with its answer, or null when none runs or
   * it does not answer within `waitMs` (a worker that exits meanwhile never does).
   */
  const ask = (message: (id: number) => ToWorker, waitMs: number): Promise<Pong | null> =>
    new Promise((resolve) => {
      if (worker === null || !ready) return resolve(null);
      const id = ++pings;
      const timer = setTimeout(() => {
        pongs.delete(id);
        resolve(null);
      }, waitMs);
      pongs.set(id, (pong) => {
        clearTimeout(timer);
        pongs.delete(id);
        resolve(pong);
      });
      worker.postMessage(message(id));
    });
  const ping = (waitMs: number) => ask((id) => ({ kind: 'ping', id }), waitMs);

  const check: HealthCheck = {
    name: 'webhook-dispatcher',
    // Running, and its event loop answers (the health check's own timeout is the shorter wait).
    async check() {
      if ((await ping(HEALTH_WAIT_MS)) === null) throw new Error('webhook dispatcher thread not running or not answering');
    },
  };

  const thread: DispatcherThread = {
    get feature() {
      return withThread;
    },
    check,
    threadId: () => (ready ? (worker?.threadId ?? null) : null),
    running: () => (ready ? Promise.resolve() : new Promise<void>((resolve) => waiters.push(resolve))),
    heapUsedBytes: async () => (await ping(HEAP_ANSWER_MS))?.heapUsedBytes ?? null,
    engine: async () => (await ping(HEAP_ANSWER_MS))?.engine ?? null,
    async kill() {
      await worker?.terminate();
    },
    killIndex() {
      worker?.postMessage({ kind: 'kill-index' } satisfies ToWorker);
    },
    busy(ms) {
      worker?.postMessage({ kind: 'busy', ms } satisfies ToWorker);
    },
    forwardDeletions: (_core, { beforeDeleteAnswered }) => {
      // A worker not running meanwhile reads the subscriptions from the log when it starts; one that
      // does not answer in time is not waited for longer (its own tail meets the deletion).
      beforeDeleteAnswered.push(async (subscriptionId) => {
        await ask((id) => ({ kind: 'deleted', subscriptionId, id }), DELETION_WAIT_MS);
      });
      return {};
    },
    holdWrites: (_core, { directory }) => ({ writeHold: holdingWrites(pressure, directory) }),
  };
  const withThread = { ...feature, thread, deliveryEngine: thread.engine };
  return thread;
};

/** The dispatcher thread among a service's features, if its role runs one. */
export const dispatcherThreadOf = (features: readonly Feature[]): DispatcherThread | null =>
  features.flatMap((f) => ('thread' in f ? [(f as DispatcherThread['feature']).thread] : []))[0] ?? null;
