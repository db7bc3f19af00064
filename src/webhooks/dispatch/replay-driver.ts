// Drives one replay (src/domain/replay/replay.ts) on the dispatcher that holds its lease: reads the
// workspace's public events from the cursor in offset order, a page at a time, and schedules a
// delivery of each matching one under the replay's own delivery id. Paced behind live work: a page
// is read only while the replay's deliveries not yet attempted are fewer than WINDOW and live
// attempts leave room (dispatcher.replayRoom), and its deliveries are due now, so they queue behind
// every attempt already due. The cursor and the counts are recorded in the replay's stream (at most
// every PROGRESS_EVERY_MS), so a restart continues from there; what was scheduled after the last
// record is found among the subscription's deliveries and not scheduled twice, and what waits there
// for its first attempt is taken up (its driver may have stopped before putting it in a shared
// schedule). Each page's events are looked up by delivery id (the dispatcher's DeliveryLookup: the
// delivery-history index and the records it has not applied yet), so neither a start nor a page costs
// the subscription's whole delivery history.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Decided } from '../../domain/aggregate.js';
import type { Delivery } from '../../domain/delivery/delivery.js';
import { deliveryIdOf, legacyDeliveryIdOf, legacyReplayDeliveryIdOf, replayDeliveryIdOf } from '../../domain/delivery/ids.js';
import { foldReplay, replayAggregate, replayEventId, replayStream, type Replay, type ReplayCommand } from '../../domain/replay/replay.js';
import type { MicrosClock } from '../../log/clock.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';
import type { SubscriptionDirectory } from '../subscriptions.js';
import type { Dispatcher } from './dispatcher.js';
import { loggedSince } from './subscription-logged.js';

/** A replay's deliveries scheduled and not attempted yet, at most. */
export const REPLAY_WINDOW = 8;
/** How long a paced replay waits before looking at the room again. */
const PACE_MS = 20;
const PROGRESS_EVERY_MS = 1_000;

export interface ReplayDriverDeps {
  readonly log: EventLog;
  readonly subscriptions: SubscriptionDirectory;
  readonly dispatcher: Pick<Dispatcher, 'replay' | 'replayRoom' | 'replayBacklog' | 'takeUp' | 'lookup'>;
  readonly clock: MicrosClock;
  /** Whether this dispatcher still holds the replay's lease (renewing it). */
  readonly keep: () => Promise<boolean>;
  /** The dispatcher is stopping. */
  readonly stopped: () => boolean;
}

/** `finished`: completed, cancelled or its subscription gone; `interrupted`: stopped or the lease lost, another driver continues. */
export type DriveOutcome = 'finished' | 'interrupted';

/** `stream`: where the replay's records are (an older release's replay: its subscription's replay stream). */
export const driveReplay = async (deps: ReplayDriverDeps, workspaceId: string, replay: Replay, stream = replayStream(replay.id)): Promise<DriveOutcome> => {
  const { log, subscriptions, dispatcher, clock } = deps;
  const subscriptionId = replay.subscriptionId;

  /** The log decides: a directory in another thread or process may not have seen the deletion yet. */
  const subscriptionGone = async (): Promise<boolean> => {
    const row = subscriptions.get(workspaceId, subscriptionId);
    return row === undefined || (await loggedSince(log, row)) === 'gone';
  };

  // The replay as its stream has it, caught up before each step with the records after the last read.
  let folded = { state: null as Replay | null, next: 0 };
  /** Records a replay step, never leaving a replay stream behind a deleted subscription. */
  const record = async (command: ReplayCommand): Promise<void> => {
    const since = await log.readStream(stream, folded.next);
    const last = since.at(-1);
    folded = { state: foldReplay(since, replay.id, folded.state), next: last === undefined ? folded.next : last.revision + 1 };
    const decided = replayAggregate.decide(command, folded.state);
    if (decided._tag === 'Left') throw new Error(`replay ${replay.id}: ${decided.left.message}`);
    const steps: readonly Decided[] = decided.right;
    if (steps.length === 0) return;
    await log.append(stream, steps.map((step) => ({ id: replayEventId(step), type: step.type, workspaceId, data: step.data })), 'any');
    if (await subscriptionGone()) await log.deleteStream(stream);
  };

  // An event's deliveries by id, in both shapes an id has had (an older release's replay is continued):
  // this replay's own (a driver that stopped after its last progress record scheduled them), and, for
  // only_failed, the live one, whose status is read when its page is.
  const replayedIds = (eventId: string) => [replayDeliveryIdOf(eventId, subscriptionId, replay.id), legacyReplayDeliveryIdOf(eventId, subscriptionId, replay.id)];
  const liveIds = (eventId: string) => [deliveryIdOf(eventId, subscriptionId), legacyDeliveryIdOf(eventId, subscriptionId)];
  const lookup = await dispatcher.lookup(subscriptionId);
  // A dispatcher records a delivery before it puts the first attempt in a shared schedule: a driver
  // killed between the two left it where nothing would attempt it. An offer leaves one that is
  // scheduled or claimed as it is.
  for (const id of await dispatcher.replayBacklog(subscriptionId, replay.id)) await dispatcher.takeUp(subscriptionId, id, 1);

  let { cursor, matched } = replay;
  let recordedCursor = cursor;
  let recordedAt = Date.now();
  const types = replay.types.length === 0 ? {} : { types: replay.types };
  for (;;) {
    if (deps.stopped() || !(await deps.keep())) return 'interrupted';
    const row = subscriptions.get(workspaceId, subscriptionId);
    if (row === undefined) return 'finished';
    if (!row.isActive) {
      await record({ kind: 'cancel', replayId: replay.id, reason: 'subscription_inactive', at: clock() });
      return 'finished';
    }
    const room = Math.min(REPLAY_WINDOW - (await dispatcher.replayBacklog(subscriptionId, replay.id)).length, dispatcher.replayRoom());
    if (room <= 0) {
      await sleep(PACE_MS);
      continue;
    }
    if (await subscriptionGone()) return 'finished';
    const page = await log.readFeed({ workspaceId, fromOffset: cursor + 1, limit: room, ...types });
    let done = page.length < room;
    const inRange: RecordedEvent[] = [];
    for (const event of page) {
      if (event.position > replay.throughPosition || (replay.until !== null && (event.offset as number) > replay.until)) {
        done = true;
        break;
      }
      inRange.push(event);
    }
    const known = inRange.length === 0 ? new Map<string, Delivery>() : await lookup(inRange.flatMap((event) => (replay.onlyFailed ? [...replayedIds(event.id), ...liveIds(event.id)] : replayedIds(event.id))));
    const due: RecordedEvent[] = [];
    for (const event of inRange) {
      cursor = event.offset as number;
      if (replay.onlyFailed && !liveIds(event.id).some((id) => known.get(id)?.status === 'failed')) continue;
      matched++;
      if (!replayedIds(event.id).some((id) => known.has(id))) due.push(event);
    }
    await Promise.all(due.map((event) => dispatcher.replay(event, row, replay.id)));
    if (cursor > recordedCursor && (done || Date.now() - recordedAt >= PROGRESS_EVERY_MS)) {
      await record({ kind: 'progress', replayId: replay.id, cursor, matched });
      recordedCursor = cursor;
      recordedAt = Date.now();
    }
    if (done) {
      await record({ kind: 'complete', replayId: replay.id, at: clock() });
      return 'finished';
    }
  }
};
