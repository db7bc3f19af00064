// One /updates item: the envelope exactly as a webhook carries it, plus its feed offset. The export
// script writes the same items, one JSON text per line, built by feedLines straight from the log.
import { isoMicros, linkRuleOf, linksOf, toEnvelope, type Envelope, type LinkRule } from '../domain/envelope.js';
import type { JsonObject, RecordedEvent } from '../log/event-log.js';
import { plainStringField } from './json-field.js';

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
 * isoMicros for offsets that mostly arrive in order, given with their decimal digits (the line
 * carries those too): the date and time change once a second, and within one the fraction is the
 * offset's last six digits.
 */
const timestamps = (): ((micros: number, digits: string) => string) => {
  let second = NaN;
  let head = '';
  let tail = '';
  return (micros, digits) => {
    const s = Math.floor(micros / 1_000_000);
    // Below one second the digits are fewer than the fraction's six.
    if (s !== second || micros < 1_000_000) {
      const stamp = isoMicros(micros);
      [second, head, tail] = [s, stamp.slice(0, -12), stamp.slice(-6)];
      return stamp;
    }
    return `${head}${digits.slice(-6)}${tail}`;
  };
};

const json = JSON.stringify;

/** JSON text of a string: quoted as it is when nothing in it needs escaping (ids, types), else JSON.stringify's. */
const quoted = (text: string): string => {
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    // What JSON.stringify escapes: controls, quote, backslash, and surrogates when lone (any, here).
    if (c < 0x20 || c === 0x22 || c === 0x5c || (c >= 0xd800 && c <= 0xdfff)) return json(text);
  }
  return `"${text}"`;
};

/** Link texts kept per rule: a ticket's events come close together, and building the text costs more than the rest of the line. */
const LINKS_KEPT = 4096;

/**
 * The `_links` texts of stored events, from the one field of the data they come from: read from the
 * text (json-field.ts), the data is parsed only when that field is not plain text.
 */
const linksTexts = (): ((type: string, data: string) => string) => {
  const kept = new Map<LinkRule, Map<string, string>>();
  return (type, data) => {
    const rule = linkRuleOf(type);
    if (rule === null) return '{}';
    const plain = plainStringField(data, rule.key);
    if (plain === null) return json(linksOf(rule, (JSON.parse(data) as JsonObject)[rule.key]));
    let texts = kept.get(rule);
    if (texts === undefined || texts.size >= LINKS_KEPT) kept.set(rule, (texts = new Map()));
    let text = texts.get(plain);
    if (text === undefined) texts.set(plain, (text = json(linksOf(rule, plain))));
    return text;
  };
};

/**
 * Returns the function giving `JSON.stringify(feedItem(record))` of a stored event, built as text:
 * the data goes in as stored. The log writes it with JSON.stringify, whose output JSON.parse and
 * JSON.stringify give back unchanged, so re-serialising it would only cost time, and so would
 * parsing it for `_links` (above). Keys and their order are feedItem's;
 * test/updates/export.int.spec.ts holds the two byte-identical. One function per export: it
 * remembers the last timestamp and recent links.
 */
export const feedLines = (): ((event: StoredFeedEvent) => string) => {
  const timestamp = timestamps();
  const links = linksTexts();
  return (event) => {
    const offset = String(event.offset);
    return (
      `{"id":${quoted(event.id)},"type":${quoted(event.type)},"timestamp":"${timestamp(event.offset, offset)}","workspace_id":${quoted(event.workspaceId)}` +
      `,"data":${event.data},"_links":${links(event.type, event.data)},"offset":${offset}}`
    );
  };
};
