// The delivery aggregate: one event to one subscription, attempted up to 6 times on the configured
// schedule (spec "States and transitions — Delivery"). Pure: instants (µs) and delays come in commands.
// Its events are internal; they live in the subscription's delivery stream and die with it.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import { domainError } from '../errors.js';
import type { JsonObject, RecordedEvent } from '../../log/event-log.js';

export type DeliveryStatus = 'waiting' | 'delivered' | 'failed' | 'cancelled';

/**
 * How delivery events are stored: the events one flush writes to a subscription's stream travel as
 * one log event `{steps: [{type, data}, ...]}`. A delivery makes at least two events and every
 * projection of the log reads every row, so packing them keeps the log's row count near the public
 * events' count.
 */
export const DELIVERY_RECORDED = 'delivery.recorded';
/**
 * A manual retry is recorded as an event of its own type, not packed: the dispatchers tail the log
 * for it, and a tail of this type alone does not read back every record of their own.
 */
export const DELIVERY_RETRY_REQUESTED = 'delivery.retry_requested';
/** Every log event type that carries delivery steps. */
export const DELIVERY_RECORD_TYPES: readonly string[] = [DELIVERY_RECORDED, DELIVERY_RETRY_REQUESTED];

type Step = Pick<RecordedEvent, 'type' | 'data'>;

export const packSteps = (steps: readonly Step[]): Step => ({ type: DELIVERY_RECORDED, data: { steps: steps.map((s) => ({ type: s.type, data: s.data })) } });

export const unpackSteps = (event: Step): readonly Step[] =>
  event.type === DELIVERY_RECORDED ? ((event.data['steps'] ?? []) as readonly Step[]) : [event];

export interface AttemptRecord {
  readonly round: number;
  readonly attempt: number;
  readonly delivered: boolean;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly latencyMs: number;
  readonly attemptedAt: number;
}

export interface Delivery {
  readonly id: string;
  readonly subscriptionId: string;
  readonly eventId: string;
  readonly eventType: string;
  /** Log position of the event delivered: its body is re-derived from it after a restart. */
  readonly eventPosition: number;
  /** The replay that sent the event again (src/domain/replay), null for the live delivery. */
  readonly replayId: string | null;
  readonly createdAt: number;
  readonly status: DeliveryStatus;
  /** 1 for the automatic schedule; each manual retry starts a new round of attempts 1..6. */
  readonly round: number;
  /** Last attempt number of the current round; 0 before the first. */
  readonly attempt: number;
  /** µs; set only while waiting. */
  readonly nextAttemptAt: number | null;
  readonly history: readonly AttemptRecord[];
}

export interface AttemptOutcome {
  readonly delivered: boolean;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly latencyMs: number;
}

export type DeliveryCommand =
  | {
      readonly kind: 'schedule';
      readonly deliveryId: string;
      readonly subscriptionId: string;
      readonly eventId: string;
      readonly eventType: string;
      readonly eventPosition: number;
      /** Every event at or below this position has had its deliveries recorded (the derived fan-out checkpoint). */
      readonly fannedOutThrough: number;
      readonly replayId?: string;
      readonly at: number;
    }
  | { readonly kind: 'record_attempt'; readonly attempt: number; readonly outcome: AttemptOutcome; readonly at: number; readonly retryDelaysMs: readonly number[] }
  | { readonly kind: 'cancel'; readonly reason: string; readonly at: number }
  | { readonly kind: 'retry'; readonly at: number };

/** Attempt n+1 comes delays[n-1] after attempt n; after the last delay there is no further attempt. */
export const nextAttemptAt = (attempt: number, attemptedAt: number, retryDelaysMs: readonly number[]): number | null => {
  const delay = retryDelaysMs[attempt - 1];
  return delay === undefined ? null : attemptedAt + delay * 1000;
};

const num = (data: JsonObject, key: string): number => Number(data[key]);
const nullable = <T>(value: unknown, as: (v: unknown) => T): T | null => (value === null || value === undefined ? null : as(value));

type State = Delivery | null;

/** Idempotent: a step repeated in the log (an at-least-once record) changes nothing. */
const evolve: Aggregate<State, DeliveryCommand>['evolve'] = (state, { type, data }) => {
  if (type === 'delivery.scheduled') {
    if (state !== null) return state;
    return {
      id: String(data['delivery_id']),
      subscriptionId: String(data['subscription_id']),
      eventId: String(data['event_id']),
      eventType: String(data['event_type']),
      eventPosition: num(data, 'event_position'),
      replayId: nullable(data['replay_id'], String),
      createdAt: num(data, 'scheduled_at'),
      status: 'waiting',
      round: 1,
      attempt: 0,
      nextAttemptAt: num(data, 'scheduled_at'),
      history: [],
    };
  }
  if (state === null) return state;
  switch (type) {
    case 'delivery.attempted': {
      if (state.status !== 'waiting' || num(data, 'round') !== state.round || num(data, 'attempt') !== state.attempt + 1) return state;
      const record: AttemptRecord = {
        round: num(data, 'round'),
        attempt: num(data, 'attempt'),
        delivered: data['delivered'] === true,
        statusCode: nullable(data['status_code'], Number),
        error: nullable(data['error'], String),
        latencyMs: num(data, 'latency_ms'),
        attemptedAt: num(data, 'attempted_at'),
      };
      const next = nullable(data['next_attempt_at'], Number);
      const status: DeliveryStatus = record.delivered ? 'delivered' : next === null ? 'failed' : 'waiting';
      return { ...state, status, attempt: record.attempt, nextAttemptAt: status === 'waiting' ? next : null, history: [...state.history, record] };
    }
    case 'delivery.cancelled':
      return state.status === 'waiting' ? { ...state, status: 'cancelled', nextAttemptAt: null } : state;
    case DELIVERY_RETRY_REQUESTED:
      if (num(data, 'round') <= state.round) return state;
      return { ...state, status: 'waiting', round: num(data, 'round'), attempt: 0, nextAttemptAt: num(data, 'requested_at') };
    default:
      return state;
  }
};

const conflict = (message: string, delivery: Delivery) => left(domainError('CONFLICT', message, { delivery_id: delivery.id, status: delivery.status }));

const decide: Aggregate<State, DeliveryCommand>['decide'] = (command, state) => {
  if (command.kind === 'schedule') {
    if (state !== null) return right([]); // a replayed fan-out: already scheduled
    return right([
      {
        type: 'delivery.scheduled',
        data: {
          delivery_id: command.deliveryId,
          subscription_id: command.subscriptionId,
          event_id: command.eventId,
          event_type: command.eventType,
          event_position: command.eventPosition,
          fanned_out_through: command.fannedOutThrough,
          // Only on replayed deliveries: the live records keep their shape.
          ...(command.replayId === undefined ? {} : { replay_id: command.replayId }),
          scheduled_at: command.at,
        },
      },
    ]);
  }
  if (state === null) return left(domainError('CONFLICT', 'Delivery not found'));
  switch (command.kind) {
    case 'record_attempt': {
      // A repeated outcome for an attempt already recorded (at-least-once bookkeeping) changes nothing.
      if (state.status !== 'waiting' || command.attempt !== state.attempt + 1) return right([]);
      const { outcome } = command;
      const next = outcome.delivered ? null : nextAttemptAt(command.attempt, command.at, command.retryDelaysMs);
      return right([
        {
          type: 'delivery.attempted',
          data: {
            delivery_id: state.id,
            round: state.round,
            attempt: command.attempt,
            delivered: outcome.delivered,
            status_code: outcome.statusCode,
            error: outcome.error,
            latency_ms: outcome.latencyMs,
            attempted_at: command.at,
            next_attempt_at: next,
          },
        },
      ]);
    }
    case 'cancel':
      if (state.status !== 'waiting') return right([]);
      return right([{ type: 'delivery.cancelled', data: { delivery_id: state.id, round: state.round, reason: command.reason, cancelled_at: command.at } }]);
    case 'retry':
      if (state.status === 'waiting') return conflict('Delivery is already waiting for an attempt', state);
      if (state.status === 'delivered') return conflict('Delivery was already delivered', state);
      return right([{ type: DELIVERY_RETRY_REQUESTED, data: { delivery_id: state.id, round: state.round + 1, requested_at: command.at } }]);
  }
};

export const deliveryAggregate: Aggregate<State, DeliveryCommand> = { initial: null, evolve, decide };

/** Folds a subscription's delivery stream into its deliveries, in the order they were scheduled. */
export const foldDeliveries = (events: readonly Step[]): Map<string, Delivery> => {
  const deliveries = new Map<string, Delivery>();
  for (const event of events.flatMap(unpackSteps)) {
    const id = String(event.data['delivery_id']);
    const next = evolve(deliveries.get(id) ?? null, event);
    if (next !== null) deliveries.set(id, next);
  }
  return deliveries;
};
