// The relay needs each public event with its offset. The SQLite log assigns offsets inside the commit,
// so its tail carries them; the EventStoreDB log sets them in readFeed only (its sequencer indexes
// them apart from the writers), so there the offset is looked up in the workspace's feed, which the
// sequencer fills in log order: reading it forwards meets the events in the order the tail does.
import type { EventLog, RecordedEvent } from '../log/event-log.js';

export interface SequencedLookupOptions {
  /** Wait before asking again when the sequencer has not indexed the event yet. */
  readonly retryDelayMs?: number;
  readonly pageSize?: number;
  readonly stopped?: () => boolean;
}

/** The record with its offset, or null when the event left the log (its stream was deleted). */
export type SequencedLookup = (record: RecordedEvent) => Promise<RecordedEvent | null>;

interface WorkspaceFeed {
  /** Next offset to read. */
  from: number;
  /** Highest log position the feed has shown: an event below it and not met was deleted. */
  indexedThrough: number;
  /** Entries read ahead of the tail, by event id. */
  readonly ahead: Map<string, RecordedEvent>;
}

export const createSequencedLookup = (log: EventLog, options: SequencedLookupOptions = {}): SequencedLookup => {
  const retryDelayMs = options.retryDelayMs ?? 200;
  const pageSize = options.pageSize ?? 500;
  const feeds = new Map<string, WorkspaceFeed>();

  const feedOf = (workspaceId: string): WorkspaceFeed => {
    let feed = feeds.get(workspaceId);
    if (feed === undefined) {
      feed = { from: 0, indexedThrough: 0, ahead: new Map() };
      feeds.set(workspaceId, feed);
    }
    return feed;
  };

  return async (record) => {
    if (record.offset !== null) return record;
    const feed = feedOf(record.workspaceId);
    for (;;) {
      const found = feed.ahead.get(record.id);
      if (found !== undefined) {
        feed.ahead.delete(record.id);
        return found;
      }
      const page = await log.readFeed({ workspaceId: record.workspaceId, fromOffset: feed.from, limit: pageSize });
      for (const entry of page) {
        // Entries before the tail's record were relayed before a restart.
        if (entry.position >= record.position) feed.ahead.set(entry.id, entry);
        feed.indexedThrough = Math.max(feed.indexedThrough, entry.position);
        feed.from = (entry.offset ?? feed.from) + 1;
      }
      if (feed.ahead.has(record.id) || page.length === pageSize) continue;
      if (feed.indexedThrough > record.position || options.stopped?.() === true) return null;
      await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
    }
  };
};
