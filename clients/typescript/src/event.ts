// The event envelope every webhook and /updates item carries, typed by the generated event types.
import { EVENT_SCHEMAS, EVENT_TYPES, type EventDataByType, type EventType } from './events.js';
import { mismatch, type JsonSchema } from './schema.js';
import { verifyStandard, type HeadersLike, type StandardOptions } from './signature.js';

export interface Envelope<T extends string, D> {
  /** The event id: the same on every retry and for every subscription; drop duplicates by it. */
  readonly id: string;
  readonly type: T;
  /** ISO 8601 with microseconds and an explicit UTC offset. */
  readonly timestamp: string;
  readonly workspace_id: string;
  readonly data: D;
  /** Relative GET addresses of what the event is about. */
  readonly _links: Readonly<Record<string, string>>;
}

/** An event of a type the catalogue knows, its data typed. */
export type Event<T extends EventType = EventType> = { [K in T]: Envelope<K, EventDataByType[K]> }[T];
/** An event of a type newer than these helpers, or `webhook.test`: its data untyped. */
export type OtherEvent = Envelope<string, Readonly<Record<string, unknown>>>;

export class EventParseError extends Error {
  override readonly name = 'EventParseError';
}

const ENVELOPE: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    timestamp: { type: 'string' },
    workspace_id: { type: 'string' },
    data: { type: 'object' },
    _links: { type: 'object' },
  },
  required: ['id', 'type', 'timestamp', 'workspace_id', 'data', '_links'],
};

const known: ReadonlySet<string> = new Set(EVENT_TYPES);

/** True when the event is of that type, narrowing its data: `if (isEvent(e, 'ticket.created')) e.data.subject`. */
export const isEvent = <T extends EventType>(event: { readonly type: string }, type: T): event is Event<T> => event.type === type;

/** Checks a parsed JSON value as an envelope; a known type's data must match its schema. Throws EventParseError. */
export const toEvent = (value: unknown): Event | OtherEvent => {
  const envelope = mismatch(ENVELOPE, value);
  if (envelope !== null) throw new EventParseError(`not an event envelope: ${envelope}`);
  const event = value as OtherEvent;
  if (known.has(event.type)) {
    const data = mismatch(EVENT_SCHEMAS[event.type as EventType], event.data, '$.data');
    if (data !== null) throw new EventParseError(`${event.type}: ${data}`);
  }
  return event as Event | OtherEvent;
};

/** Parses the body bytes of a delivery (after verification) into an event. Throws EventParseError. */
export const parseEvent = (body: Uint8Array | string): Event | OtherEvent => {
  let value: unknown;
  try {
    value = JSON.parse(typeof body === 'string' ? body : new TextDecoder().decode(body));
  } catch (error) {
    throw new EventParseError(`the body is not JSON: ${(error as Error).message}`);
  }
  return toEvent(value);
};

/** Verifies a delivery's Standard Webhooks headers (signature and timestamp) and parses its body. */
export const receive = (body: Uint8Array | string, headers: HeadersLike, secrets: string | readonly string[], options?: StandardOptions): Event | OtherEvent => {
  verifyStandard(body, headers, secrets, options);
  return parseEvent(body);
};
