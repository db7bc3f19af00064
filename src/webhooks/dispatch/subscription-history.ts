// What a subscription leaves in the log besides its own stream, deleted with it: its delivery history
// and its replays (a replay's driver stops when it finds the subscription gone).
import { deliveryStream } from '../../domain/delivery/ids.js';
import type { EventLog } from '../../log/event-log.js';
import { replayStreamsOf } from './replay-records.js';

export const deleteSubscriptionHistory = async (log: EventLog, subscriptionId: string): Promise<void> => {
  await log.deleteStream(deliveryStream(subscriptionId));
  for (const stream of await replayStreamsOf(log, subscriptionId)) await log.deleteStream(stream);
};
