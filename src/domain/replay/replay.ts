// The replay aggregate: a subscription's history sent again (issue 15, "History replay"). A request
// fixes its range at request time: public events of the workspace with offset in [since, until] and
// log position at most `throughPosition` (the log's head then), so events after the request are left
// to the live fan-out and never delivered twice. A dispatcher drives it, recording how far it went
// (`progressed`: the offset reached and how many events matched, each one a delivery scheduled) so
// that a restart continues there. Pure: ids, instants and the head position come in commands.
// Each replay lives in a stream of its own, which dies with its subscription: reading one replay
// costs its own records, never those of the subscription's other replays (an older release kept them
// all in one stream per subscription, whose fold grew with every replay's progress records; such a
// stream is still read for the replays it holds).
import { createHash } from 'node:crypto';
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../aggregate.js';
import { domainError } from '../errors.js';
import { PUBLIC_EVENT_TYPES, isPublicEventType } from '../event-types.js';
import type { RecordedEvent } from '../../log/event-log.js';

export const REPLAY_EVENTS = {
  requested: 'replay.requested',
  progressed: 'replay.progressed',
  completed: 'replay.completed',
  cancelled: 'replay.cancelled',
} as const;

export type ReplayStatus = 'running' | 'completed' | 'cancelled';

export interface Replay {
  readonly id: string;
  readonly subscriptionId: string;
  /** Offsets (µs), inclusive; `until` null: up to `throughPosition` only. */
  readonly since: number;
  readonly until: number | null;
  /** The log's head position at request time: nothing after it is replayed. */
  readonly throughPosition: number;
  /** Empty: every public type. */
  readonly types: readonly string[];
  readonly onlyFailed: boolean;
  readonly status: ReplayStatus;
  /** The last offset looked at (since - 1 before the first). */
  readonly cursor: number;
  /** Events matched so far: each got its replayed delivery scheduled. */
  readonly matched: number;
  readonly requestedAt: number;
  readonly finishedAt: number | null;
  readonly reason: string | null;
}

export type ReplayCommand =
  | ({ readonly kind: 'request'; readonly replayId: string; readonly at: number } & Pick<Replay, 'subscriptionId' | 'since' | 'until' | 'throughPosition' | 'types' | 'onlyFailed'>)
  | { readonly kind: 'progress'; readonly replayId: string; readonly cursor: number; readonly matched: number }
  | { readonly kind: 'complete'; readonly replayId: string; readonly at: number }
  | { readonly kind: 'cancel'; readonly replayId: string; readonly reason: string; readonly at: number };

/** A replay's stream: its request, its progress records and its end. */
export const replayStream = (replayId: string): string => `replay-${replayId}`;

/** Where an older release recorded every replay of a subscription: read for the replays it holds, deleted with the subscription. */
export const legacyReplayStream = (subscriptionId: string): string => `replays-${subscriptionId}`;

type State = Replay | null;

const num = (value: unknown): number => Number(value);

const evolve: Aggregate<State, ReplayCommand>['evolve'] = (replay, { type, data }) => {
  if (type === REPLAY_EVENTS.requested) {
    if (replay !== null) return replay;
    const since = num(data['since']);
    return {
      id: String(data['replay_id']),
      subscriptionId: String(data['subscription_id']),
      since,
      until: data['until'] === null ? null : num(data['until']),
      throughPosition: num(data['through_position']),
      types: (data['types'] as readonly string[] | undefined) ?? [],
      onlyFailed: data['only_failed'] === true,
      status: 'running',
      cursor: since - 1,
      matched: 0,
      requestedAt: num(data['requested_at']),
      finishedAt: null,
      reason: null,
    };
  }
  if (replay?.status !== 'running') return replay;
  switch (type) {
    case REPLAY_EVENTS.progressed:
      // A repeated or late record never moves it back.
      if (num(data['cursor']) <= replay.cursor) return replay;
      return { ...replay, cursor: num(data['cursor']), matched: num(data['matched']) };
    case REPLAY_EVENTS.completed:
      return { ...replay, status: 'completed', finishedAt: num(data['completed_at']) };
    case REPLAY_EVENTS.cancelled:
      return { ...replay, status: 'cancelled', finishedAt: num(data['cancelled_at']), reason: String(data['reason']) };
    default:
      return replay;
  }
};

const one = (type: string, data: Decided['data']): readonly Decided[] => [{ type, data }];

const decide: Aggregate<State, ReplayCommand>['decide'] = (command, replay) => {
  if (command.kind === 'request') {
    if (replay !== null) return right([]);
    const unknown = [...new Set(command.types.filter((name) => !isPublicEventType(name)))];
    if (unknown.length > 0) return left(domainError('VALIDATION_ERROR', 'Unknown event name', { unknown, valid: [...PUBLIC_EVENT_TYPES] }));
    if (command.until !== null && command.until < command.since) return left(domainError('VALIDATION_ERROR', 'until is before since', { since: command.since, until: command.until }));
    return right(
      one(REPLAY_EVENTS.requested, {
        replay_id: command.replayId,
        subscription_id: command.subscriptionId,
        since: command.since,
        until: command.until,
        through_position: command.throughPosition,
        types: [...new Set(command.types)],
        only_failed: command.onlyFailed,
        requested_at: command.at,
      }),
    );
  }
  if (replay === null) return left(domainError('CONFLICT', 'Replay not found', { replay_id: command.replayId }));
  // Settled: whatever a driver still had to say no longer matters.
  if (replay.status !== 'running') return right([]);
  switch (command.kind) {
    case 'progress':
      if (command.cursor <= replay.cursor) return right([]);
      return right(one(REPLAY_EVENTS.progressed, { replay_id: replay.id, cursor: command.cursor, matched: command.matched }));
    case 'complete':
      return right(one(REPLAY_EVENTS.completed, { replay_id: replay.id, completed_at: command.at }));
    case 'cancel':
      return right(one(REPLAY_EVENTS.cancelled, { replay_id: replay.id, reason: command.reason, cancelled_at: command.at }));
  }
};

/** One replay: its stream's events (an older release's stream of a subscription's replays holds others too: see foldReplay). */
export const replayAggregate: Aggregate<State, ReplayCommand> = { initial: null, evolve, decide };

/** Replay `replayId` from `events` (of its own stream, or an older release's stream of its subscription's replays), on top of `from`; null when they hold none of it. */
export const foldReplay = (events: readonly Pick<RecordedEvent, 'type' | 'data'>[], replayId: string, from: State = null): State =>
  events.reduce((replay, event) => (event.data['replay_id'] === replayId ? evolve(replay, event) : replay), from);

/** The log event id of a replay step: the same step recorded again (a driver taken over) makes the same id, which the log drops. */
export const replayEventId = (step: Decided): string =>
  createHash('sha256').update(`${String(step.data['replay_id'])}:${step.type}:${String(step.data['cursor'] ?? '')}`).digest('hex').slice(0, 32);
