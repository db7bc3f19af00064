// append() on EventStoreDB with the port's semantics: exact expected-revision checks in 0-based
// revisions, and idempotence by event id whatever `expected` says.
//
// The server's own idempotence holds only for a retry with the same expected revision (and is best
// effort with ANY), so every append first reads the stream: ids already there are not written
// again, and a call whose ids are all there returns the stored records. The actual write then
// names the raw revision just read as its expected revision, so a concurrent writer makes it fail
// (WrongExpectedVersion) instead of slipping in between; we re-read and decide again. Cost: one
// stream read per append (streams here are aggregates: short).
import { NO_STREAM, WrongExpectedVersionError } from '@eventstore/db-client';
import type { AppendExpectedRevision, EventStoreDBClient } from '@eventstore/db-client';
import { WrongExpectedRevision } from './event-log.js';
import type { AppendResult, ExpectedRevision, NewEvent, RecordedEvent } from './event-log.js';
import { decodeEvent, encodeEvent, toRecord } from './eventstoredb-codec.js';
import type { StoredEvent } from './eventstoredb-codec.js';
import { readStreamOrEmpty } from './eventstoredb-reads.js';

/** Rounds of read-decide-write before giving up on a stream that keeps changing under `any`. */
const MAX_ROUNDS = 10;
const READ_BACK_ATTEMPTS = 5;

interface StreamState {
  readonly events: readonly StoredEvent[];
  /** Raw revisions of the first and last live events (null: no live events). */
  readonly base: bigint | null;
  readonly last: bigint | null;
}

const loadStream = async (client: EventStoreDBClient, esdbStream: string): Promise<StreamState> => {
  const resolved = await readStreamOrEmpty(client, esdbStream);
  const events = resolved.flatMap((r) => {
    const event = decodeEvent(r.event);
    return event === null ? [] : [event];
  });
  return { events, base: resolved[0]?.event?.revision ?? null, last: resolved.at(-1)?.event?.revision ?? null };
};

const lastRevision = (state: StreamState): number | 'no_stream' =>
  state.base === null || state.last === null ? 'no_stream' : Number(state.last - state.base);

const holds = (expected: ExpectedRevision, actual: number | 'no_stream'): boolean =>
  expected === 'any' || expected === actual;

/**
 * A soft-deleted stream has no live events, yet the server may count its old events for the
 * expected-revision check. Its raw last revision (from the rejection) is safe to expect only while
 * it is below the stream's truncate-before mark, i.e. still deleted; otherwise someone recreated it.
 */
const deletedStreamRevision = async (
  client: EventStoreDBClient,
  esdbStream: string,
  error: WrongExpectedVersionError,
): Promise<bigint | null> => {
  if (typeof error.actualVersion !== 'bigint') return null;
  const { metadata } = await client.getStreamMetadata(esdbStream);
  const truncateBefore = metadata?.truncateBefore;
  return typeof truncateBefore === 'number' && Number(error.actualVersion) < truncateBefore ? error.actualVersion : null;
};

/**
 * The just-written events, checked to be ours (same ids, same order); null when they do not show.
 * Writing to a soft-deleted stream lifts the deletion with a second, separate metadata write, so
 * right after the append the stream may still read as deleted for a moment: try a few times.
 */
const readBack = async (
  client: EventStoreDBClient,
  esdbStream: string,
  firstRevision: bigint,
  written: readonly NewEvent[],
): Promise<StoredEvent[] | null> => {
  for (let attempt = 1; ; attempt += 1) {
    const resolved = await readStreamOrEmpty(client, esdbStream, { fromRevision: firstRevision, maxCount: written.length });
    const events = resolved.flatMap((r) => {
      const event = decodeEvent(r.event);
      return event === null ? [] : [event];
    });
    if (events.length === written.length && events.every((event, i) => event.id === written[i]?.id)) return events;
    if (attempt === READ_BACK_ATTEMPTS) return null;
    await new Promise((resolve) => setTimeout(resolve, 20 * attempt));
  }
};

/** The call's records in call order (a repeated id maps to its one record). */
const recordsOf = (events: readonly NewEvent[], byId: ReadonlyMap<string, StoredEvent>, stream: string, base: bigint): RecordedEvent[] =>
  events.flatMap((e) => {
    const event = byId.get(e.id);
    return event === undefined ? [] : [toRecord(event, stream, base, null)];
  });

const uniqueById = (events: readonly NewEvent[]): NewEvent[] => [...new Map(events.map((e) => [e.id, e])).values()];

/** Writes `events` expecting the raw revision; null when the stream moved (or a deleted one must be recreated). */
const write = async (
  client: EventStoreDBClient,
  esdbStream: string,
  events: readonly NewEvent[],
  state: StreamState,
): Promise<bigint | null> => {
  const attempt = async (expectedRevision: AppendExpectedRevision): Promise<bigint> =>
    (await client.appendToStream(esdbStream, events.map(encodeEvent), { expectedRevision })).nextExpectedRevision;
  try {
    return await attempt(state.last ?? NO_STREAM);
  } catch (error) {
    if (!(error instanceof WrongExpectedVersionError)) throw error;
    const deletedAt = state.base === null ? await deletedStreamRevision(client, esdbStream, error) : null;
    if (deletedAt === null) return null;
    try {
      return await attempt(deletedAt);
    } catch (retryError) {
      if (retryError instanceof WrongExpectedVersionError) return null;
      throw retryError;
    }
  }
};

export const appendEvents = async (
  client: EventStoreDBClient,
  esdbStream: string,
  stream: string,
  events: readonly NewEvent[],
  expected: ExpectedRevision,
): Promise<AppendResult> => {
  for (let round = 0; round < MAX_ROUNDS; round += 1) {
    const state = await loadStream(client, esdbStream);
    const actual = lastRevision(state);
    const nextRevision = actual === 'no_stream' ? -1 : actual;
    const stored = new Map(state.events.map((event) => [event.id, event]));
    const fresh = uniqueById(events.filter((event) => !stored.has(event.id)));
    if (events.length > 0 && fresh.length === 0) {
      return { nextRevision, records: recordsOf(events, stored, stream, state.base ?? 0n) };
    }
    if (!holds(expected, actual)) throw new WrongExpectedRevision(stream, expected, actual);
    if (fresh.length === 0) return { nextRevision, records: [] };

    const last = await write(client, esdbStream, fresh, state);
    if (last === null) continue; // someone wrote meanwhile: decide again on a fresh read
    const firstNew = last - BigInt(fresh.length) + 1n;
    const base = state.base ?? firstNew;
    const written = await readBack(client, esdbStream, firstNew, fresh);
    // Not where the server said (it answered a racing retry as idempotent): the next round finds them.
    if (written === null) continue;
    const byId = new Map([...state.events, ...written].map((event) => [event.id, event]));
    return { nextRevision: Number(last - base), records: recordsOf(events, byId, stream, base) };
  }
  throw new Error(`append to ${stream} kept conflicting with concurrent writers (${MAX_ROUNDS} rounds)`);
};
