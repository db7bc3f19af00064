// The replay aggregate: a subscription's history sent again (issue 15, "History replay"). A request
// fixes its range at request time: public events of the workspace with offset in [since, until] and
// log position at most `throughPosition` (the log's head then), so events after the request are left
// to the live fan-out and never delivered twice. A dispatcher drives it, recording how far it went
// (`progressed`: the offset reached and how many events matched, each one a delivery scheduled) so
// that a restart continues there. Pure: ids, instants and the head position come in commands.
// Every replay of a subscription lives in one stream that dies with the subscription.
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

/** Every replay of one subscription, by id. */
export type Replays = ReadonlyMap<string, Replay>;

export type ReplayCommand =
  | ({ readonly kind: 'request'; readonly replayId: string; readonly at: number } & Pick<Replay, 'subscriptionId' | 'since' | 'until' | 'throughPosition' | 'types' | 'onlyFailed'>)
  | { readonly kind: 'progress'; readonly replayId: string; readonly cursor: number; readonly matched: number }
  | { readonly kind: 'complete'; readonly replayId: string; readonly at: number }
  | { readonly kind: 'cancel'; readonly replayId: string; readonly reason: string; readonly at: number };

/** A subscription's replays: one stream, deleted with the subscription. */
export const replayStream = (subscriptionId: string): string => `replays-${subscriptionId}`;

const num = (value: unknown): number => Number(value);

const evolve: Aggregate<Replays, ReplayCommand>['evolve'] = (state, { type, data }) => {
  const id = String(data['replay_id']);
  const replay = state.get(id);
  const set = (next: Replay): Replays => new Map(state).set(id, next);
  if (type === REPLAY_EVENTS.requested) {
    if (replay !== undefined) return state;
    const since = num(data['since']);
    return set({
      id,
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
    });
  }
  if (replay?.status !== 'running') return state;
  switch (type) {
    case REPLAY_EVENTS.progressed:
      // A repeated or late record never moves it back.
      if (num(data['cursor']) <= replay.cursor) return state;
      return set({ ...replay, cursor: num(data['cursor']), matched: num(data['matched']) });
    case REPLAY_EVENTS.completed:
      return set({ ...replay, status: 'completed', finishedAt: num(data['completed_at']) });
    case REPLAY_EVENTS.cancelled:
      return set({ ...replay, status: 'cancelled', finishedAt: num(data['cancelled_at']), reason: String(data['reason']) });
    default:
      return state;
  }
};

const one = (type: string, data: Decided['data']): readonly Decided[] => [{ type, data }];

const decide: Aggregate<Replays, ReplayCommand>['decide'] = (command, state) => {
  const replay = state.get(command.replayId);
  if (command.kind === 'request') {
    if (replay !== undefined) return right([]);
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
  if (replay === undefined) return left(domainError('CONFLICT', 'Replay not found', { replay_id: command.replayId }));
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

export const replayAggregate: Aggregate<Replays, ReplayCommand> = { initial: new Map(), evolve, decide };

export const foldReplays = (events: readonly Pick<RecordedEvent, 'type' | 'data'>[]): Replays => events.reduce(evolve, replayAggregate.initial);

/** The log event id of a replay step: the same step recorded again (a driver taken over) makes the same id, which the log drops. */
export const replayEventId = (step: Decided): string =>
  createHash('sha256').update(`${String(step.data['replay_id'])}:${step.type}:${String(step.data['cursor'] ?? '')}`).digest('hex').slice(0, 32);
