// Writes delivery events to their subscription's stream in batches: what is recorded within one
// short interval goes out together as one packed log event per stream (domain/delivery packSteps),
// all submitted in the same turn so that the SQLite log commits them in one transaction (one fsync
// for the lot). Each stream has one append at a time, so its events keep their order. Embedded,
// nothing waits on a record to send an attempt; only the fan-out checkpoint and the outcome
// bookkeeping do. With a shared schedule a first attempt is put only once its delivery is durable
// (whoever claims it reads it from the log): such a record is `urgent` and goes out at the next turn
// of the event loop, with whatever else was recorded in that turn, not at the next interval.
import type { Decided } from '../../domain/aggregate.js';
import { packSteps } from '../../domain/delivery/delivery.js';
import { recordedEventId } from '../../domain/delivery/ids.js';
import type { EventLog } from '../../log/event-log.js';

export interface Recorder {
  /** Resolves once the events are durable in `stream`; `urgent`: written at the next turn, not the next interval. */
  record(stream: string, workspaceId: string, steps: readonly Decided[], urgent?: boolean): Promise<void>;
  /** Resolves once everything recorded so far is settled. */
  drain(): Promise<void>;
}

/** One batch of a stream: the steps recorded since its last append, and the promise they all share. */
interface Batch {
  readonly steps: Decided[];
  /** Someone waits on it to go on: it goes out at the next turn. */
  urgent: boolean;
  readonly done: Promise<void>;
  readonly settle: (error?: unknown) => void;
}

interface Queue {
  readonly workspaceId: string;
  batch: Batch | null;
  busy: boolean;
}

const newBatch = (): Batch => {
  let settle: Batch['settle'] = () => undefined;
  const done = new Promise<void>((resolve, reject) => {
    settle = (error) => (error === undefined ? resolve() : reject(error));
  });
  return { steps: [], urgent: false, done, settle };
};

export const createRecorder = (log: EventLog, options: { readonly flushEveryMs?: number } = {}): Recorder => {
  const flushEveryMs = options.flushEveryMs ?? 25;
  const queues = new Map<string, Queue>();
  const unsettled = new Set<Promise<void>>();
  let timer: NodeJS.Timeout | null = null;
  let immediate: NodeJS.Immediate | null = null;

  const flushStream = (stream: string, queue: Queue, batch: Batch): void => {
    queue.batch = null;
    queue.busy = true;
    const packed = packSteps(batch.steps);
    log
      .append(stream, [{ id: recordedEventId(batch.steps), type: packed.type, workspaceId: queue.workspaceId, data: packed.data }], 'any')
      .then(() => batch.settle(), (error: unknown) => batch.settle(error ?? new Error('append failed')))
      .finally(() => {
        queue.busy = false;
        if (queue.batch !== null) next(queue.batch);
        else if (queues.get(stream) === queue) queues.delete(stream);
      });
  };

  const flushAll = (): void => {
    if (timer !== null) clearTimeout(timer);
    if (immediate !== null) clearImmediate(immediate);
    timer = null;
    immediate = null;
    for (const [stream, queue] of queues) if (!queue.busy && queue.batch !== null) flushStream(stream, queue, queue.batch);
  };

  /** Flushes at the next interval, or at the next turn for an urgent batch. */
  function next(batch: Batch): void {
    if (batch.urgent) immediate ??= setImmediate(flushAll);
    else timer ??= setTimeout(flushAll, flushEveryMs);
  }

  return {
    record(stream, workspaceId, steps, urgent = false) {
      const queue = queues.get(stream) ?? { workspaceId, batch: null, busy: false };
      queues.set(stream, queue);
      if (queue.batch === null) {
        const batch = newBatch();
        queue.batch = batch;
        unsettled.add(batch.done);
        void batch.done.catch(() => undefined).finally(() => unsettled.delete(batch.done));
      }
      queue.batch.steps.push(...steps);
      queue.batch.urgent ||= urgent;
      next(queue.batch);
      return queue.batch.done;
    },
    async drain() {
      while (unsettled.size > 0) await Promise.allSettled([...unsettled]);
    },
  };
};
