// What a starting dispatcher takes over (the deliveries still waiting), handed to it while the engine
// already runs: at hundreds of thousands waiting the reading takes seconds, and neither the
// dispatcher's sends nor, in the embedded mode, the service's start wait for it.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Dispatcher, RestoredDelivery } from './dispatcher.js';
import type { DeliveryHistory } from './restore.js';

/** How long a take-over that failed part way waits before it reads again (an offer made twice changes nothing). */
export const TAKE_OVER_RETRY_MS = 1_000;

export interface TakeOver {
  /** Resolves once all of it was handed to the dispatcher: true, or false when it was stopped first. */
  readonly done: Promise<boolean>;
  /** Ends it at the next delivery; resolves once it has ended. */
  stop(): Promise<void>;
}

/** Hands the dispatcher `first` (read already) and, should that fail part way, a new read after a pause, until all of one is handed over or it is stopped. */
export const takeOverMeanwhile = (dispatcher: Pick<Dispatcher, 'resume'>, first: DeliveryHistory, read: () => Promise<DeliveryHistory>): TakeOver => {
  let stopping = false;
  // A stop ends the pause before a new read too: a service stopped meanwhile does not wait it out.
  const stopped = new AbortController();
  async function* untilStopped(deliveries: DeliveryHistory['deliveries']): AsyncGenerator<RestoredDelivery> {
    for await (const restored of deliveries) {
      if (stopping) return;
      yield restored;
    }
  }
  const done = (async (): Promise<boolean> => {
    let history: DeliveryHistory | null = first;
    while (!stopping) {
      try {
        history ??= await read();
        await dispatcher.resume(untilStopped(history.deliveries), history.fannedOutThrough);
        return !stopping;
      } catch (error) {
        console.error('webhook dispatcher: taking over what waits failed, reading it again:', error);
        history = null;
        await sleep(TAKE_OVER_RETRY_MS, undefined, { signal: stopped.signal }).catch(() => undefined);
      }
    }
    return false;
  })();
  return {
    done,
    async stop() {
      stopping = true;
      stopped.abort();
      await done;
    },
  };
};
