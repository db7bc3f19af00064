// The per-workspace offset feed kept by the sequencer (eventstoredb-sequencer.ts) and read by
// readFeed. Each workspace has an index stream whose events are entries {offset, position, stream,
// revision, eventId, type}, one per public event, with offsets strictly increasing by revision.
//
// readFeed finds the first entry with offset >= fromOffset by galloping back from the stream's last
// entry and then bisecting (index streams are never deleted, so revisions are dense): a poll near
// the end costs a few single-event reads, one far back O(log n). No in-memory index: any process
// can read the feed. It then reads the entries forwards and fetches each referenced event by stream
// and revision; events of deleted streams are gone from stream reads and are skipped.
//
// watchFeedIndex follows the entries as the sequencer appends them, from any process.
import { BACKWARDS, END, jsonEvent, streamNameFilter } from '@eventstore/db-client';
import type { EventData, EventStoreDBClient, ResolvedEvent } from '@eventstore/db-client';
import type { FeedQuery, LogSubscription, RecordedEvent } from './event-log.js';
import { endOfAll } from './eventstoredb-all.js';
import { decodeEvent, toRecord } from './eventstoredb-codec.js';
import type { Naming } from './eventstoredb-codec.js';
import { baseCache, readStreamOrEmpty } from './eventstoredb-reads.js';
import type { BaseCache } from './eventstoredb-reads.js';
import { consumerCall, followAll } from './eventstoredb-subscription.js';

export const FEED_EVENT_TYPE = 'feed.indexed';

export interface FeedEntry {
  readonly offset: number;
  /** Commit position of the indexed event. */
  readonly position: number;
  /** Its EventStoreDB stream and raw revision. */
  readonly stream: string;
  readonly revision: number;
  readonly eventId: string;
  readonly type: string;
}

export interface IndexedEntry extends FeedEntry {
  /** Revision of the entry in the index stream. */
  readonly indexRevision: bigint;
}

export const encodeFeedEntry = (entry: FeedEntry): EventData => jsonEvent({ type: FEED_EVENT_TYPE, data: { ...entry } });

const decodeFeedEntry = (resolved: ResolvedEvent): IndexedEntry | null => {
  const event = resolved.event;
  if (event === undefined || !event.isJson || event.type !== FEED_EVENT_TYPE) return null;
  const d = event.data as Partial<Record<keyof FeedEntry, unknown>>;
  const numbers = [d.offset, d.position, d.revision].every((n) => Number.isSafeInteger(n));
  const strings = [d.stream, d.eventId, d.type].every((s) => typeof s === 'string');
  return numbers && strings ? { ...(d as FeedEntry), indexRevision: event.revision } : null;
};

const readEntries = async (client: EventStoreDBClient, feed: string, from: bigint, count: number): Promise<IndexedEntry[]> =>
  (await readStreamOrEmpty(client, feed, { fromRevision: from, maxCount: count })).flatMap((resolved) => {
    const entry = decodeFeedEntry(resolved);
    return entry === null ? [] : [entry];
  });

/** The index stream's last entry, or null when the workspace has none yet. */
export const lastEntry = async (client: EventStoreDBClient, feed: string): Promise<IndexedEntry | null> => {
  const [last] = await readStreamOrEmpty(client, feed, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
  return last === undefined ? null : decodeFeedEntry(last);
};

/** Index-stream revision of the first entry with offset >= fromOffset; null when there is none. */
const firstRevisionFrom = async (client: EventStoreDBClient, feed: string, fromOffset: number): Promise<bigint | null> => {
  const last = await lastEntry(client, feed);
  if (last === null || last.offset < fromOffset) return null;
  const offsetAt = async (revision: bigint): Promise<number> => {
    const [entry] = await readEntries(client, feed, revision, 1);
    if (entry === undefined) throw new Error(`feed index ${feed} has no entry at revision ${revision}`);
    return entry.offset;
  };
  // Invariant: offsetAt(hi) >= fromOffset, and lo is 0 or offsetAt(lo - 1) < fromOffset.
  let hi = last.indexRevision;
  let lo = 0n;
  for (let step = 1n; hi - step >= 0n; step *= 2n) {
    const probe = hi - step;
    if ((await offsetAt(probe)) < fromOffset) {
      lo = probe + 1n;
      break;
    }
    hi = probe;
  }
  while (lo < hi) {
    const mid = (lo + hi) / 2n;
    if ((await offsetAt(mid)) >= fromOffset) hi = mid;
    else lo = mid + 1n;
  }
  return hi;
};

/** The event an entry points at, or null when it is gone (stream deleted, maybe written again). */
const fetchIndexed = async (client: EventStoreDBClient, naming: Naming, bases: BaseCache, entry: FeedEntry): Promise<RecordedEvent | null> => {
  const stream = naming.portStream(entry.stream);
  if (stream === null) return null;
  const [resolved] = await readStreamOrEmpty(client, entry.stream, { fromRevision: BigInt(entry.revision), maxCount: 1 });
  const event = decodeEvent(resolved?.event);
  if (event === null || event.id !== entry.eventId) return null;
  const base = await bases.get(entry.stream);
  if (base === null) return null;
  return toRecord({ ...event, commit: BigInt(entry.position) }, stream, base, entry.offset);
};

const PAGE = 200;
const PARALLEL_FETCHES = 32;

export const readFeedFrom = async (client: EventStoreDBClient, naming: Naming, query: FeedQuery): Promise<RecordedEvent[]> => {
  const feed = naming.feedStream(query.workspaceId);
  const types = query.types === undefined ? null : new Set(query.types);
  const bases = baseCache(client);
  const records: RecordedEvent[] = [];
  let next = query.limit > 0 ? await firstRevisionFrom(client, feed, query.fromOffset) : null;
  while (next !== null && records.length < query.limit) {
    const page = await readEntries(client, feed, next, PAGE);
    const lastOfPage = page.at(-1);
    next = lastOfPage === undefined ? null : lastOfPage.indexRevision + 1n;
    const wanted = page.filter((entry) => entry.offset >= query.fromOffset && (types === null || types.has(entry.type)));
    for (let i = 0; i < wanted.length && records.length < query.limit; ) {
      const batch = wanted.slice(i, i + Math.min(PARALLEL_FETCHES, query.limit - records.length));
      i += batch.length;
      const fetched = await Promise.all(batch.map((entry) => fetchIndexed(client, naming, bases, entry)));
      records.push(...fetched.filter((record): record is RecordedEvent => record !== null));
    }
  }
  return records;
};

/**
 * Each entry appended to a feed stream of this namespace once the returned promise resolved, with its
 * workspace and offset: the entry is written after its event, so readFeed finds the event (unless its
 * stream was deleted since). Per workspace the entries come in revision, hence offset, order.
 *
 * $all filtered on the server by the feed streams' prefix: only index entries travel (the prefix also
 * matches the sequencer's checkpoint stream, whose events are no entries). It starts after the last
 * event of $all read before the promise resolves, and after a lost connection it resumes after the
 * last entry it handled, or from that same start when it handled none yet: no entry is missed across
 * an outage (one missed would only delay a poll to its timeout). A filtered subscription also
 * receives checkpoints (positions scanned so far); the client hands them only to a filter's
 * checkpointReached callback, and none is set: a resumption scans again from the last entry.
 */
export const watchFeedIndex = async (
  client: EventStoreDBClient,
  naming: Naming,
  handler: (workspaceId: string, offset: number) => Promise<void> | void,
  onError: (error: unknown) => void,
): Promise<LogSubscription> => {
  const filter = streamNameFilter({ prefixes: [naming.feedPrefix] });
  return followAll(client, { from: await endOfAll(client), filter }, async (resolved) => {
    const workspaceId = naming.feedWorkspace(resolved.event?.streamId ?? '');
    const entry = workspaceId === null ? null : decodeFeedEntry(resolved);
    if (workspaceId !== null && entry !== null) await consumerCall(() => handler(workspaceId, entry.offset));
  }, onError);
};
