// The updates feature: GET /api/v1/updates, and in the embedded mode the publisher that wakes it.
import type { Core, Feature } from '../app/core.js';
import type { LogSubscription } from '../log/event-log.js';
import { createLongPoll } from './long-poll.js';
import { startFeedPublisher } from './publisher.js';
import { updatesRoutes } from './routes.js';

export const createUpdatesFeature = (core: Core): Feature => {
  const longPoll = createLongPoll(core.log, core.notifier);
  let publisher: LogSubscription | null = null;
  return {
    name: 'updates',
    routes: updatesRoutes({ clock: core.clock, longPoll }),
    async start() {
      publisher = await startFeedPublisher(core.log, core.notifier);
    },
    async drain() {
      longPoll.drain();
    },
    async stop() {
      await publisher?.stop();
      publisher = null;
    },
  };
};
