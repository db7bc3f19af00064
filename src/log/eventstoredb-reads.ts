// Reads shared by the adapter's parts: a stream read that treats missing and deleted streams as
// empty, and the lookup of where a stream's live events begin.
import { FORWARDS, START, StreamDeletedError, StreamNotFoundError } from '@eventstore/db-client';
import type { EventStoreDBClient, ReadStreamOptions, ResolvedEvent } from '@eventstore/db-client';

/** The stream's events; [] when it does not exist, was soft-deleted (StreamNotFound) or tombstoned. */
export const readStreamOrEmpty = async (
  client: EventStoreDBClient,
  esdbStream: string,
  options: ReadStreamOptions = {},
): Promise<ResolvedEvent[]> => {
  const events: ResolvedEvent[] = [];
  try {
    for await (const resolved of client.readStream(esdbStream, { direction: FORWARDS, ...options })) events.push(resolved);
  } catch (error) {
    if (error instanceof StreamNotFoundError || error instanceof StreamDeletedError) return [];
    throw error;
  }
  return events;
};

/**
 * Raw revision of the stream's first live event, or null when it has none. After a soft delete the
 * server hides the old events from stream reads (not from $all) and numbers new ones on from the old
 * end: this base tells which $all events are still live and turns raw revisions into 0-based ones.
 */
export const liveBase = async (client: EventStoreDBClient, esdbStream: string): Promise<bigint | null> => {
  const [first] = await readStreamOrEmpty(client, esdbStream, { fromRevision: START, maxCount: 1 });
  return first?.event?.revision ?? null;
};

export interface BaseCache {
  readonly get: (esdbStream: string) => Promise<bigint | null>;
  readonly forget: (esdbStream: string) => void;
}

/** Memoises liveBase; each read builds its own, a subscription keeps one and forgets on deletions. */
export const baseCache = (client: EventStoreDBClient): BaseCache => {
  const bases = new Map<string, Promise<bigint | null>>();
  return {
    get: (esdbStream) => {
      let base = bases.get(esdbStream);
      if (base === undefined) {
        base = liveBase(client, esdbStream);
        bases.set(esdbStream, base);
        base.catch(() => bases.delete(esdbStream));
      }
      return base;
    },
    forget: (esdbStream) => void bases.delete(esdbStream),
  };
};
