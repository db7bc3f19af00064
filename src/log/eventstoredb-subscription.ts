// One $all subscription consumed one event at a time: the next event is not taken before the
// handler's promise settles, and stop() ends delivery and waits for the handler in progress.
import type { AllStreamResolvedEvent, EventStoreDBClient, SubscribeToAllOptions } from '@eventstore/db-client';
import type { LogSubscription } from './event-log.js';

export interface AllSubscription extends LogSubscription {
  /**
   * Resolves once the server has confirmed the subscription (it fixes where the subscription starts
   * before it confirms, so what is written afterwards reaches it) or once the subscription has
   * ended; rejects as `done` does.
   */
  confirmed(): Promise<void>;
}

export const consumeAll = (
  client: EventStoreDBClient,
  options: SubscribeToAllOptions,
  handle: (resolved: AllStreamResolvedEvent) => Promise<void>,
): AllSubscription => {
  const subscription = client.subscribeToAll(options);
  const confirmation = new Promise<void>((resolve) => subscription.once('confirmation', resolve));
  let stopped = false;
  const run = async (): Promise<void> => {
    try {
      for await (const resolved of subscription) {
        if (stopped) break;
        await handle(resolved);
      }
    } catch (error) {
      // Destroying the stream in stop() ends the iteration with a premature-close error.
      if (!stopped) throw error;
    } finally {
      stopped = true;
      // Nobody reads it any more: a late error of the cancelled call must not go unhandled.
      subscription.on('error', () => undefined);
      await subscription.unsubscribe().catch(() => undefined);
    }
  };
  const done = run();
  return {
    done,
    confirmed: () => Promise.race([confirmation, done]),
    stop: async () => {
      if (!stopped) {
        stopped = true;
        subscription.destroy();
      }
      await done.catch(() => undefined);
    },
  };
};
