// One /updates item: the envelope exactly as a webhook carries it, plus its feed offset. The export
// script writes the same items, one JSON text per line, built by feedLines straight from the log.
import { isoMicros, linksFor, toEnvelope, type Envelope } from '../domain/envelope.js';
import type { JsonObject, RecordedEvent } from '../log/event-log.js';

export type FeedItem = Envelope & { readonly offset: number };

export const feedItem = (record: RecordedEvent): FeedItem => ({ ...toEnvelope(record), offset: record.offset as number });

/** The envelope an item carries, its keys in the envelope's order: what a webhook of that event carries. */
export const itemEnvelope = ({ offset: _, ...envelope }: FeedItem): Envelope => envelope;

/** A sequenced public event as the log stores it: the data still the JSON text written at append. */
export interface StoredFeedEvent {
  readonly id: string;
  readonly type: string;
  readonly workspaceId: string;
  readonly offset: number;
  readonly data: string;
}

/**
 * isoMicros for offsets that mostly arrive in order: the date and time change once a second, so
 * only the six digits of the fraction (before the "+00:00") are redone within a second.
 */
const timestamps = (): ((micros: number) => string) => {
  let second = NaN;
  let head = '';
  let tail = '';
  return (micros) => {
    const s = Math.floor(micros / 1_000_000);
    if (s !== second) {
      const stamp = isoMicros(micros);
      [second, head, tail] = [s, stamp.slice(0, -12), stamp.slice(-6)];
      return stamp;
    }
    return `${head}${String(micros - s * 1_000_000).padStart(6, '0')}${tail}`;
  };
};

const json = JSON.stringify;

/**
 * Returns the function giving `JSON.stringify(feedItem(record))` of a stored event, built as text:
 * the data goes in as stored. The log writes it with JSON.stringify, whose output JSON.parse and
 * JSON.stringify give back unchanged, so re-serialising it would only cost time; it is parsed once,
 * for `_links`. Keys and their order are feedItem's; test/updates/export.int.spec.ts holds the two
 * byte-identical. One function per export: it remembers the last timestamp.
 */
export const feedLines = (): ((event: StoredFeedEvent) => string) => {
  const timestamp = timestamps();
  // The timestamp is digits and ASCII punctuation only: no JSON escaping needed.
  return (event) =>
    `{"id":${json(event.id)},"type":${json(event.type)},"timestamp":"${timestamp(event.offset)}","workspace_id":${json(event.workspaceId)}` +
    `,"data":${event.data},"_links":${json(linksFor(event.type, JSON.parse(event.data) as JsonObject))},"offset":${event.offset}}`;
};
