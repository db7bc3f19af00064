// What a subscription leaves in the log besides its own stream, deleted with it: its delivery history
// and its replays (a replay's driver stops when it finds the subscription gone). A long history goes
// a batch at a time (the log's deleteStream), half a minute at a million events, so a process may stop
// part way: a note in the log says a deletion began, and goes once it has ended. Every dispatcher's
// start takes up the deletions whose note is still there (`deleteHistoriesMeanwhile`).
import { deliveryStream } from '../../domain/delivery/ids.js';
import { eachEvent } from '../../log/each-event.js';
import { LogUnavailable, type EventLog } from '../../log/event-log.js';
import { eventId } from '../../shared/ids.js';
import { replayStreamsOf } from './replay-records.js';

/** The note that a subscription's history is being deleted: internal, never in the feed. */
export const HISTORY_DELETION_EVENT = 'webhook.history_deletion_started';

/** One stream a subscription, so the note goes with one delete once that deletion has ended. */
export const historyDeletionStream = (subscriptionId: string): string => `history-deletion-${subscriptionId}`;

export const deleteSubscriptionHistory = async (log: EventLog, subscriptionId: string): Promise<void> => {
  const note = { id: eventId(), type: HISTORY_DELETION_EVENT, workspaceId: '', data: { subscription_id: subscriptionId } };
  await log.append(historyDeletionStream(subscriptionId), [note], 'any');
  await log.deleteStream(deliveryStream(subscriptionId));
  for (const stream of await replayStreamsOf(log, subscriptionId)) await log.deleteStream(stream);
  // Ended by whichever deleter ends first: its last batch found the history empty, so whatever another
  // deleter had left to do is done too.
  await log.deleteStream(historyDeletionStream(subscriptionId));
};

/** The subscriptions whose history deletion began and has not ended (read by type: the cost of those notes alone). */
export const unfinishedHistoryDeletions = async (log: EventLog): Promise<string[]> => {
  const unfinished = new Set<string>();
  await eachEvent(log, { after: 0, types: [HISTORY_DELETION_EVENT] }, (event) => unfinished.add(String(event.data['subscription_id'])));
  return [...unfinished];
};

/**
 * Deletes these histories one after the other in the background, then the ones a stopped process left
 * unfinished; resolves once all are gone, never rejects. A close of the log stops it between batches,
 * and the notes left take it up at the next start.
 */
export const deleteHistoriesMeanwhile = async (log: EventLog, subscriptionIds: Iterable<string>): Promise<void> => {
  const deleting = new Set(subscriptionIds);
  try {
    for (const subscriptionId of await unfinishedHistoryDeletions(log)) deleting.add(subscriptionId);
  } catch (error) {
    console.error('webhook delivery histories: cannot read the deletions left unfinished:', error);
  }
  for (const subscriptionId of deleting) {
    try {
      await deleteSubscriptionHistory(log, subscriptionId);
    } catch (error) {
      // Closed (a stop) or unreachable: the rest would fail alike, and the notes keep it for the next start.
      if (error instanceof LogUnavailable) return void console.warn(`webhook delivery histories: stopped deleting, the log is unavailable (${error.message}); the next start goes on`);
      console.error(`webhook ${subscriptionId}: deleting its delivery history:`, error);
    }
  }
};
