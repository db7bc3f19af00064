// $all subscriptions that outlive a lost connection, consumed one event at a time: the next event is
// not taken before the handler's promise settles, and stop() ends delivery and waits for the handler
// in progress.
//
// How @eventstore/db-client 6 shows a lost subscription: the gRPC call fails and the subscription
// stream emits 'error' (a dropped connection or a stopped server: UnavailableError; the server
// cancelling the call: CancelledError; a node that may not serve it: NotLeaderError), or, in
// principle, just ends. The client then drops its channel and its next call connects again (to the
// leader a NotLeaderError names), but it never resubscribes: that is done here, RETRY_DELAY_MS
// later, after the last event the handler finished. A subscription from a position starts after it
// (reads include it), and events at or before it are skipped anyway.
import { START } from '@eventstore/db-client';
import type { AllStreamResolvedEvent, EventStoreDBClient, Filter, Position } from '@eventstore/db-client';
import type { LogSubscription } from './event-log.js';
import { isAfter } from './eventstoredb-all.js';

const RETRY_DELAY_MS = 1000;

/** Exclusive: events after it. */
export type StartPosition = Position | typeof START;

/** A failure of the consumer's handler: it ends the subscription, where any other failure is retried. */
class HandlerFailed extends Error {
  constructor(readonly failure: unknown) {
    super('subscription handler failed', { cause: failure });
    this.name = 'HandlerFailed';
  }
}

/** Runs the consumer's own handler inside a followAll handler: what it throws ends the subscription. */
export const consumerCall = async (call: () => Promise<void> | void): Promise<void> => {
  try {
    await call();
  } catch (error) {
    throw new HandlerFailed(error);
  }
};

export interface FollowOptions {
  /** Where the first subscription starts; a function is called (again after a failure) until it answers. */
  readonly from: StartPosition | (() => Promise<StartPosition>);
  readonly filter?: Filter;
  /** Called before each resubscription: drop what an event missed meanwhile could have made stale. */
  readonly onResubscribe?: () => void;
}

interface Attempt {
  /** Resolves when the subscription ends (cancel() or the server), rejects when it fails. */
  readonly ended: Promise<void>;
  readonly cancel: () => void;
}

const subscribeOnce = (
  client: EventStoreDBClient,
  from: StartPosition,
  filter: Filter | undefined,
  handle: (resolved: AllStreamResolvedEvent) => Promise<void>,
  onConfirmed: () => void,
): Attempt => {
  const subscription = client.subscribeToAll({ fromPosition: from, filter });
  subscription.once('confirmation', onConfirmed);
  let cancelled = false;
  const run = async (): Promise<void> => {
    try {
      for await (const resolved of subscription) {
        if (cancelled) break;
        await handle(resolved);
      }
    } catch (error) {
      // Destroying the stream in cancel() ends the iteration with a premature-close error.
      if (!cancelled) throw error;
    } finally {
      cancelled = true;
      // Nobody reads it any more: a late error of the cancelled call must not go unhandled.
      subscription.on('error', () => undefined);
      await subscription.unsubscribe().catch(() => undefined);
    }
  };
  const ended = run();
  return {
    ended,
    cancel: () => {
      if (cancelled) return;
      cancelled = true;
      subscription.destroy();
    },
  };
};

/**
 * Follows $all from `options.from` until stop() or until the handler fails through consumerCall
 * (then `done` rejects with the handler's error). Any other failure, its own reads included, is
 * told to `onError` once per outage (until a subscription is confirmed again) and retried.
 */
export const followAll = (
  client: EventStoreDBClient,
  options: FollowOptions,
  handle: (resolved: AllStreamResolvedEvent) => Promise<void>,
  onError: (error: unknown) => void,
): LogSubscription => {
  const { from: initial, filter, onResubscribe } = options;
  let from: StartPosition | null = typeof initial === 'function' ? null : initial;
  let stopped = false;
  let attempt: Attempt | null = null;
  let wake = (): void => undefined;
  let reporting = true;

  const handleNew = async (resolved: AllStreamResolvedEvent): Promise<void> => {
    const position = resolved.event?.position;
    if (position !== undefined && from !== null && from !== START && !isAfter(position, from)) return;
    await handle(resolved);
    if (position !== undefined) from = position;
  };

  const pause = (): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, RETRY_DELAY_MS);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const run = async (): Promise<void> => {
    for (let again = false; !stopped; again = true) {
      try {
        if (again) onResubscribe?.();
        from ??= typeof initial === 'function' ? await initial() : initial;
        if (stopped) return;
        attempt = subscribeOnce(client, from, filter, handleNew, () => {
          reporting = true;
        });
        await attempt.ended;
        if (!stopped) throw new Error('EventStoreDB ended the $all subscription');
      } catch (error) {
        if (error instanceof HandlerFailed) throw error.failure;
        if (stopped) return;
        if (reporting) onError(error);
        reporting = false;
        await pause();
      }
    }
  };
  const done = run();

  return {
    done,
    stop: async () => {
      stopped = true;
      attempt?.cancel();
      wake();
      await done.catch(() => undefined);
    },
  };
};
