// The source of long polls' wake-ups, run by one process (the embedded one, or the relay): announces
// each new public event's offset to the Notifier once the log's feed can return it (watchFeed), so a
// woken poll finds it. A failed announcement only delays waiters to their timeout (the client's next
// poll reads the event), so it is reported, never fatal.
import type { EventLog, LogSubscription } from '../log/event-log.js';
import type { Notifier } from './notifier.js';

export const startFeedPublisher = async (log: EventLog, notifier: Notifier): Promise<LogSubscription> => {
  let failing = false;
  const watch = await log.watchFeed(async (workspaceId, offset) => {
    try {
      await notifier.publish(workspaceId, offset);
      failing = false;
    } catch (error) {
      if (!failing) console.warn('updates: cannot announce new events, long polls wait for their timeout:', (error as Error).message);
      failing = true;
    }
  });
  watch.done.catch((error: unknown) => console.error('updates: the feed watch stopped, long polls wait for their timeout:', error));
  return watch;
};
