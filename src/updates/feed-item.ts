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
  /** The offset's decimal digits. */
  readonly offset: string;
  readonly data: string;
}

/**
 * isoMicros for offsets that mostly arrive in order, given as their decimal digits (the line carries
 * those too): the date and time change once a second, the digits before the last six, and within
 * one second the fraction is the last six digits.
 */
const timestamps = (): ((digits: string) => string) => {
  let second = '';
  let head = '';
  let tail = '';
  return (digits) => {
    const s = digits.slice(0, -6);
    // Below one second ('' before the last six) the digits are fewer than the fraction's six.
    if (s !== second || s === '') {
      const stamp = isoMicros(Number(digits));
      [second, head, tail] = [s, stamp.slice(0, -12), stamp.slice(-6)];
      return stamp;
    }
    return `${head}${digits.slice(-6)}${tail}`;
  };
};

const json = JSON.stringify;

/** What JSON.stringify escapes in a string: controls, quote, backslash, and surrogates when lone (any, here). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

/** JSON text of a string: quoted as it is when nothing in it needs escaping (ids, types), else JSON.stringify's. */
const quoted = (text: string): string => (NEEDS_ESCAPE.test(text) ? json(text) : `"${text}"`);

/**
 * JSON text of `_links`, as JSON.stringify writes it: the names are the spec's and the addresses are
 * URI-encoded, so nothing in them needs escaping (and JSON.stringify of the object cost more than
 * the rest of the line).
 */
const linksJson = (links: Readonly<Record<string, string>>): string => {
  let text = '';
  for (const name in links) text += `${text === '' ? '' : ','}"${name}":"${links[name] as string}"`;
  return `{${text}}`;
};

/** `make`, answering again without calling it while the key stays the same: lines in a row often share a type, a workspace, a ticket. */
const remembering = (make: (key: string) => string): ((key: string) => string) => {
  let last: string | undefined;
  let answer = '';
  return (key) => {
    if (key !== last) {
      last = key;
      answer = make(key);
    }
    return answer;
  };
};

/**
 * The `_links` texts of stored events, from the one field of the data they come from: read from the
 * text (json-field.ts), the data is parsed only when that field is not plain text.
 */
const linksTexts = (): ((type: string, data: string) => string) => {
  const byRule = new Map<LinkRule, (value: string) => string>();
  return (type, data) => {
    const rule = linkRuleOf(type);
    if (rule === null) return '{}';
    const plain = plainStringField(data, rule.key);
    if (plain === null) return linksJson(linksOf(rule, (JSON.parse(data) as JsonObject)[rule.key]));
    let linksOfValue = byRule.get(rule);
    if (linksOfValue === undefined) byRule.set(rule, (linksOfValue = remembering((value) => linksJson(linksOf(rule, value)))));
    return linksOfValue(plain);
  };
};

/** The text of a line around its data, as most events have it (ids of 32 characters, a ticket's links). */
const LINE_TEXT = 300;

/**
 * Returns the function giving the NDJSON of stored events in UTF-8: for each, the line
 * `JSON.stringify(feedItem(record))` and a newline. The data goes in as stored: the log writes it
 * with JSON.stringify, whose output JSON.parse and JSON.stringify give back unchanged, so parsing or
 * re-serialising it would only cost time. Each line is encoded into the page's buffer as one string
 * as soon as it is built: a string of the whole page, encoded at the end, cost the export as much as
 * building the lines, and three writes per line (text, data, text) about a fifth more than one. The
 * buffer is sized for lines of one byte per character, as the log's ids, types and mostly its data
 * are, and grows past that. Keys and their order are feedItem's; test/updates/export.int.spec.ts
 * holds the two byte-identical. One function per export: it remembers the last timestamp, type,
 * workspace and links.
 */
export const feedLines = (): ((events: readonly StoredFeedEvent[]) => Buffer) => {
  const timestamp = timestamps();
  const typeJson = remembering(quoted);
  const workspaceJson = remembering(quoted);
  const linksText = linksTexts();
  return (events) => {
    let out = Buffer.allocUnsafe(events.reduce((bytes, event) => bytes + event.data.length + LINE_TEXT, 0));
    let at = 0;
    for (const event of events) {
      const line =
        `{"id":${quoted(event.id)},"type":${typeJson(event.type)},"timestamp":"${timestamp(event.offset)}"` +
        `,"workspace_id":${workspaceJson(event.workspaceId)},"data":${event.data}` +
        `,"_links":${linksText(event.type, event.data)},"offset":${event.offset}}\n`;
      // A UTF-16 unit is at most 3 bytes of UTF-8: only near the end is the exact length counted.
      if (at + 3 * line.length > out.length) {
        const bytes = Buffer.byteLength(line);
        if (at + bytes > out.length) {
          const grown = Buffer.allocUnsafe(2 * out.length + bytes);
          out.copy(grown, 0, 0, at);
          out = grown;
        }
      }
      at += out.write(line, at);
    }
    return out.subarray(0, at);
  };
};
