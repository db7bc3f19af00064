// The query of GET /api/v1/updates, decoded at the edge (DESIGN.md "Decisions"). Bad values are a
// schema 422, never a clamp, except repeated type names, which count once.
import * as t from 'io-ts';
import { PUBLIC_EVENT_TYPES, isPublicEventType, type PublicEventType } from '../domain/event-types.js';
import { invalid } from '../http/api-error.js';
import { describedAs } from '../http/json-schema.js';
import { boundedInt, decode, nameList } from '../http/validation.js';

export interface UpdatesQuery {
  /** Inclusive lower bound, microseconds. */
  readonly offset: number;
  /** Undefined: every public type. */
  readonly types: readonly PublicEventType[] | undefined;
  readonly limit: number;
  readonly timeoutMs: number;
}

/**
 * An offset may lie ahead of the server clock by up to a day (the client's clock may run ahead of
 * ours); further ahead is almost certainly a unit mistake (ns or ms * 1e6) and would wait forever.
 */
export const MAX_OFFSET_AHEAD_MICROS = 86_400_000_000;

const eventTypes = describedAs(new t.Type<PublicEventType[], PublicEventType[], unknown>(
  'list of event names',
  (u): u is PublicEventType[] => Array.isArray(u) && u.every((s) => typeof s === 'string' && isPublicEventType(s)),
  (u, c) => {
    const names = nameList.validate(u, c);
    if (names._tag === 'Left') return names;
    const unknown = names.right.filter((name) => !isPublicEventType(name));
    if (unknown.length > 0) return t.failure(u, c, `Unknown event types: ${unknown.join(', ')}. Valid: ${PUBLIC_EVENT_TYPES.join(', ')}`);
    return t.success(names.right as PublicEventType[]);
  },
  (l) => l,
), { type: 'array', items: { type: 'string', enum: [...PUBLIC_EVENT_TYPES] }, description: 'Repeated, or comma separated' });

export const UpdatesQuery = t.partial({
  offset: boundedInt(0, Number.MAX_SAFE_INTEGER),
  types: eventTypes,
  limit: boundedInt(1, 1000),
  timeout: boundedInt(0, 60),
});

export const parseUpdatesQuery = (query: unknown, nowMicros: number): UpdatesQuery => {
  const decoded = decode(UpdatesQuery, query, 'query');
  const offset = decoded.offset ?? 0;
  if (offset > nowMicros + MAX_OFFSET_AHEAD_MICROS) {
    throw invalid([{ type: 'value_error', loc: ['query', 'offset'], msg: 'Offset is more than a day ahead of the server clock; pass microseconds since the Unix epoch' }]);
  }
  const types = decoded.types === undefined || decoded.types.length === 0 ? undefined : decoded.types;
  return { offset, types, limit: decoded.limit ?? 100, timeoutMs: (decoded.timeout ?? 30) * 1000 };
};
