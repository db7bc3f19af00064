// The updates feature: GET /api/v1/updates, and the publisher that wakes it. One process announces
// offsets: the embedded one itself; in the distributed mode the relay (feedPublisherFeature), never
// the API servers, which only listen.
import type { Core, Feature } from '../app/core.js';
import type { LogSubscription } from '../log/event-log.js';
import { createLongPoll } from './long-poll.js';
import { startFeedPublisher } from './publisher.js';
import { updatesRoutes } from './routes.js';

/** Announces each new public event's offset to the Notifier. */
export const feedPublisherFeature = (core: Core): Feature => {
  let publisher: LogSubscription | null = null;
  return {
    name: 'feed-publisher',
    async start() {
      publisher = await startFeedPublisher(core.log, core.notifier);
    },
    async stop() {
      await publisher?.stop();
      publisher = null;
    },
  };
};

export const createUpdatesFeature = (core: Core): Feature => {
  const longPoll = createLongPoll(core.log, core.notifier);
  const publisher = core.config.role === 'api' ? null : feedPublisherFeature(core);
  return {
    name: 'updates',
    routes: updatesRoutes({ clock: core.clock, longPoll }),
    async start() {
      await publisher?.start?.();
    },
    async drain() {
      longPoll.drain();
    },
    async stop() {
      await publisher?.stop?.();
    },
  };
};
