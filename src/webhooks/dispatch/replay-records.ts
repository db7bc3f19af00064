// Where a replay's records are and what they say, for the API (its GET) and the dispatchers (the
// runner and the driver): its own stream, or, for a replay an older release recorded, the stream of
// its subscription's replays. Finding the replays still running, and the streams a subscription's
// deletion removes, reads the log's replay requests and ends by type: the cost of the replays, never
// of their progress records.
import { REPLAY_EVENTS, foldReplay, legacyReplayStream, replayStream, type Replay } from '../../domain/replay/replay.js';
import { eachEvent } from '../../log/each-event.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';

export interface ReplayWhere {
  readonly subscriptionId: string;
  readonly workspaceId: string;
  /** The stream its records are in. */
  readonly stream: string;
}

/** Where the replay a `replay.requested` event asks for lives: the stream the request was recorded in. */
export const replayWhere = (requested: RecordedEvent): ReplayWhere => ({
  subscriptionId: String(requested.data['subscription_id']),
  workspaceId: requested.workspaceId,
  stream: requested.stream,
});

/** The subscription's replay `replayId` and its stream; undefined when the subscription has no such replay. */
export const findReplay = async (log: EventLog, subscriptionId: string, replayId: string): Promise<{ readonly replay: Replay; readonly stream: string } | undefined> => {
  for (const stream of [replayStream(replayId), legacyReplayStream(subscriptionId)]) {
    const replay = foldReplay(await log.readStream(stream), replayId);
    if (replay !== null) return replay.subscriptionId === subscriptionId ? { replay, stream } : undefined;
  }
  return undefined;
};

/** The replays requested and neither completed nor cancelled yet, by id. */
export const runningReplays = async (log: EventLog): Promise<Map<string, ReplayWhere>> => {
  const running = new Map<string, ReplayWhere>();
  await eachEvent(log, { after: 0, types: [REPLAY_EVENTS.requested] }, (event) => running.set(String(event.data['replay_id']), replayWhere(event)));
  await eachEvent(log, { after: 0, types: [REPLAY_EVENTS.completed, REPLAY_EVENTS.cancelled] }, (event) => running.delete(String(event.data['replay_id'])));
  return running;
};

/** The streams the subscription's replays are recorded in (an older release's included), for its deletion. */
export const replayStreamsOf = async (log: EventLog, subscriptionId: string): Promise<string[]> => {
  const streams = new Set([legacyReplayStream(subscriptionId)]);
  await eachEvent(log, { after: 0, types: [REPLAY_EVENTS.requested] }, (event) => {
    if (event.data['subscription_id'] === subscriptionId) streams.add(event.stream);
  });
  return [...streams];
};
