// Port reads over $all: readAll pages, the head position, and the per-event filter shared with
// subscribe. $all also holds system events, the adapter's feed index, other namespaces and, until a
// scavenge, the events of soft-deleted streams; all of those are left out here.
import { BACKWARDS, END, FORWARDS, START } from '@eventstore/db-client';
import type { AllStreamResolvedEvent, EventStoreDBClient, Position } from '@eventstore/db-client';
import type { ReadAllOptions, RecordedEvent } from './event-log.js';
import { decodeEvent, readPosition, toRecord } from './eventstoredb-codec.js';
import type { Naming, StoredEvent } from './eventstoredb-codec.js';
import type { BaseCache } from './eventstoredb-reads.js';

const PAGE = 500;

export type AllFilter = Omit<ReadAllOptions, 'limit' | 'after'>;

interface Candidate {
  readonly event: StoredEvent;
  readonly stream: string;
}

/** An $all event of the log that passes the caller's filters, before the deletion check. */
export const candidateOf = (naming: Naming, filter: AllFilter, resolved: AllStreamResolvedEvent): Candidate | null => {
  const event = decodeEvent(resolved.event);
  if (event === null) return null;
  const stream = naming.portStream(event.esdbStream);
  if (stream === null) return null;
  if (filter.workspaceId !== undefined && event.workspaceId !== filter.workspaceId) return null;
  if (filter.types !== undefined && !filter.types.includes(event.type)) return null;
  return { event, stream };
};

/** The port record of a candidate, or null when its stream was deleted since. */
export const liveRecord = async (bases: BaseCache, { event, stream }: Candidate): Promise<RecordedEvent | null> => {
  const base = await bases.get(event.esdbStream);
  return base === null || event.esdbRevision < base ? null : toRecord(event, stream, base, null);
};

/** Whether $all position a comes after b. */
export const isAfter = (a: Position, b: Position): boolean => a.commit > b.commit || (a.commit === b.commit && a.prepare > b.prepare);

const readPage = async (client: EventStoreDBClient, from: Position | 'start' | 'end', direction: typeof FORWARDS | typeof BACKWARDS): Promise<AllStreamResolvedEvent[]> => {
  const page: AllStreamResolvedEvent[] = [];
  for await (const resolved of client.readAll({ fromPosition: from, maxCount: PAGE, direction })) page.push(resolved);
  return page;
};

/**
 * Forwards from `after` (the server reads from a position inclusively; the cursor skips what was
 * already seen). The base lookups of a page's streams run in parallel.
 */
export const readAllAfter = async (client: EventStoreDBClient, naming: Naming, bases: BaseCache, options: ReadAllOptions): Promise<RecordedEvent[]> => {
  const limit = options.limit ?? Number.POSITIVE_INFINITY;
  const records: RecordedEvent[] = [];
  const start = readPosition(options.after);
  let cursor: Position = start === 'start' ? { commit: -1n, prepare: -1n } : start;
  while (records.length < limit) {
    const page = (await readPage(client, cursor.commit < 0n ? 'start' : cursor, FORWARDS)).filter(
      (resolved) => resolved.event !== undefined && isAfter(resolved.event.position, cursor),
    );
    const last = page.at(-1)?.event;
    if (last === undefined) break;
    cursor = last.position;
    const candidates = page.flatMap((resolved) => candidateOf(naming, options, resolved) ?? []);
    const live = await Promise.all(candidates.map((candidate) => liveRecord(bases, candidate)));
    records.push(...live.filter((record): record is RecordedEvent => record !== null));
  }
  return records.slice(0, limit);
};

/** Where $all ends now: the position of its last event (START when it is empty). */
export const endOfAll = async (client: EventStoreDBClient): Promise<Position | typeof START> => {
  const [last] = await client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 }).toArray();
  return last?.event?.position ?? START;
};

/** The position of the last event that `accept` takes, scanning back from the end; 0 when none. */
export const lastPosition = async (
  client: EventStoreDBClient,
  accept: (resolved: AllStreamResolvedEvent) => Promise<RecordedEvent | null>,
): Promise<number> => {
  let from: Position | 'end' = END;
  for (;;) {
    const page = await readPage(client, from, BACKWARDS);
    for (const resolved of page) {
      const record = await accept(resolved);
      if (record !== null) return record.position;
    }
    const oldest = page.at(-1)?.event;
    if (page.length < PAGE || oldest === undefined) return 0;
    from = oldest.position;
  }
};
