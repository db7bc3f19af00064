// Embedded arrival of events: tails the log from a checkpoint derived from the log itself (never an
// after-commit hook, which a crash loses). Fan-outs run concurrently, up to `window` at a time; the
// checkpoint stamped on new deliveries is the highest position below which every fan-out is durable,
// so a restart replays from there and the idempotent fan-out skips what was already recorded. A
// start hands the dispatcher what waits while the engine already runs (the backlog's attempts go out
// as it is read, and the service does not wait for it), and tails the log once all of it is handed
// over: the replayed fan-out must find what was recorded, and a new event's first attempt comes
// after the backlog's.
import { PUBLIC_EVENT_TYPES } from '../../domain/event-types.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../domain/subscription/subscription.js';
import type { EventLog, LogSubscription, RecordedEvent } from '../../log/event-log.js';
import type { SubscriptionDirectory } from '../subscriptions.js';
import type { Dispatcher } from './dispatcher.js';
import { readDeliveryHistory, type DeliveryHistory } from './restore.js';
import { takeOverMeanwhile, type TakeOver } from './take-over.js';

export interface LogTailOptions {
  readonly log: EventLog;
  readonly subscriptions: SubscriptionDirectory;
  readonly dispatcher: Dispatcher;
  /** Fan-outs under way at most. */
  readonly window?: number;
  /**
   * What a start takes over: the waiting deliveries and the fan-out checkpoint. Default: read from
   * the whole delivery history in the log; the embedded dispatcher reads them from its index.
   */
  readonly restore?: () => Promise<DeliveryHistory>;
}

export interface LogTail {
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const createLogTail = (options: LogTailOptions): LogTail => {
  const { log, subscriptions, dispatcher } = options;
  const window = options.window ?? 4096;
  const queue: { readonly position: number; done: boolean }[] = [];
  const working = new Set<Promise<void>>();
  let fannedOutThrough = 0;
  /** A failed fan-out keeps the checkpoint below it, so the next start replays it. */
  let ceiling = Number.POSITIVE_INFINITY;
  let space: (() => void) | null = null;
  let subscription: LogSubscription | null = null;
  let takeOver: TakeOver | null = null;
  /** The take-over, then the tail started once it is done. */
  let tailing: Promise<void> = Promise.resolve();

  const advance = (): void => {
    while (queue[0]?.done === true) fannedOutThrough = Math.min((queue.shift() as { position: number }).position, ceiling);
    if (queue.length < window && space !== null) {
      space();
      space = null;
    }
  };

  const workFor = (event: RecordedEvent): Promise<void> => {
    if (event.type !== SUBSCRIPTION_EVENTS.deactivated) return dispatcher.fanOut(event, fannedOutThrough);
    return dispatcher.subscriptionDeactivated(event.stream.slice(subscriptionStream('').length), event.position);
  };

  const handle = async (event: RecordedEvent): Promise<void> => {
    await subscriptions.waitFor(event.position);
    const entry = { position: event.position, done: false };
    queue.push(entry);
    const work = workFor(event)
      .catch((error: unknown) => {
        ceiling = Math.min(ceiling, event.position - 1);
        console.error(`webhook fan-out of event at position ${event.position}:`, error);
      })
      .finally(() => {
        entry.done = true;
        working.delete(work);
        advance();
      });
    working.add(work);
    if (queue.length >= window) await new Promise<void>((resolve) => (space = resolve));
  };

  return {
    async start() {
      const read = (): Promise<DeliveryHistory> => options.restore?.() ?? readDeliveryHistory(log);
      const history = await read();
      fannedOutThrough = history.fannedOutThrough;
      takeOver = takeOverMeanwhile(dispatcher, history, read);
      tailing = takeOver.done.then((whole) => {
        if (!whole) return;
        const types = [...PUBLIC_EVENT_TYPES, SUBSCRIPTION_EVENTS.deactivated];
        subscription = log.subscribe({ after: fannedOutThrough, types }, handle);
        subscription.done.catch((error: unknown) => console.error('webhook fan-out stopped:', error));
      });
    },
    async stop() {
      space?.();
      await takeOver?.stop();
      await tailing;
      await subscription?.stop();
      while (working.size > 0) await Promise.allSettled([...working]);
    },
  };
};
