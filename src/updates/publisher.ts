// The embedded mode's source of wake-ups: tails the log from its head and announces each public
// event's offset to the Notifier. A failed announcement only delays waiters to their timeout (the
// client's next poll reads the event), so it is reported, never fatal.
import { PUBLIC_EVENT_TYPES } from '../domain/event-types.js';
import type { EventLog, LogSubscription } from '../log/event-log.js';
import type { Notifier } from './notifier.js';

export const startFeedPublisher = async (log: EventLog, notifier: Notifier): Promise<LogSubscription> => {
  let failing = false;
  return log.subscribe({ after: await log.headPosition(), types: PUBLIC_EVENT_TYPES }, async (event) => {
    if (event.offset === null) return;
    try {
      await notifier.publish(event.workspaceId, event.offset);
      failing = false;
    } catch (error) {
      if (!failing) console.warn('updates: cannot announce new events, long polls wait for their timeout:', (error as Error).message);
      failing = true;
    }
  });
};
