// The event envelope every delivery and every /updates item carries (spec "Event envelope").
// One pure function builds it from a recorded event, so webhooks and /updates carry the same bytes.
import * as t from 'io-ts';
import type { JsonObject, RecordedEvent } from '../log/event-log.js';
import { EventData } from './catalogue.js';
import { PUBLIC_EVENT_TYPES, type PublicEventType } from './event-types.js';

/** The envelope's shape for one event type and its data (generic by default), as the API document shows it. */
export const EnvelopeOf = <T extends t.Mixed, D extends t.Mixed>(type: T, data: D) =>
  t.type({ id: t.string, type, timestamp: t.string, workspace_id: t.string, data, _links: t.record(t.string, t.string) });

/** Each public event's envelope: its `type` the event's name, its `data` the catalogue's codec. */
export const EventEnvelope: Readonly<Record<PublicEventType, t.Mixed>> = Object.fromEntries(
  PUBLIC_EVENT_TYPES.map((type): [PublicEventType, t.Mixed] => [type, EnvelopeOf(t.literal(type), EventData[type])]),
) as Record<PublicEventType, t.Mixed>;

/** The envelope of any public event: one of EventEnvelope, told apart by `type`. */
export const PublicEnvelope = t.union(PUBLIC_EVENT_TYPES.map((type) => EventEnvelope[type]) as unknown as [t.Mixed, t.Mixed, ...t.Mixed[]]);

export interface Envelope {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly workspace_id: string;
  readonly data: JsonObject;
  readonly _links: Readonly<Record<string, string>>;
}

const pad = (n: number, width: number): string => String(n).padStart(width, '0');

/** ISO 8601 with microseconds and an explicit UTC offset: 2026-11-21T22:47:15.123456+00:00. */
export const isoMicros = (micros: number): string => {
  const millis = Math.floor(micros / 1000);
  const iso = new Date(millis).toISOString(); // 2026-11-21T22:47:15.123Z
  return `${iso.slice(0, 19)}.${pad(((micros % 1_000_000) + 1_000_000) % 1_000_000, 6)}+00:00`;
};

/** ISO 8601 without a UTC offset, as the spec shows `created_at` of subscriptions. */
export const isoLocal = (millis: number): string => new Date(millis).toISOString().slice(0, 23);

const text = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/** Where an event type's `_links` come from: one field of its data, and the addresses it names. */
export interface LinkRule {
  readonly key: 'ticket_id' | 'id';
  /** The links for the field's value, already URI-encoded. */
  readonly links: (encoded: string) => Record<string, string>;
}

const TICKET_LINKS: LinkRule = { key: 'ticket_id', links: (id) => ({ ticket: `/api/v1/tickets/${id}`, messages: `/api/v1/tickets/${id}/messages` }) };
const CONTACT_LINKS: LinkRule = { key: 'id', links: (id) => ({ contact: `/api/v1/contacts/${id}`, tickets: `/api/v1/tickets?contact_id=${id}` }) };

/** The rule of an event type; null for types without links. */
export const linkRuleOf = (type: string): LinkRule | null =>
  type.startsWith('ticket.') || type.startsWith('message.') ? TICKET_LINKS : type.startsWith('contact.') ? CONTACT_LINKS : null;

/** What encodeURIComponent leaves as it is: ids, mostly, which then skip it. */
const UNRESERVED = /^[\w.!~*'()-]*$/;

/** `_links` made by `rule` from its field's value: none unless the value is a non-empty string. */
export const linksOf = (rule: LinkRule | null, value: unknown): Record<string, string> => {
  const id = text(value);
  return rule === null || id === null ? {} : rule.links(UNRESERVED.test(id) ? id : encodeURIComponent(id));
};

/** `_links` by the spec's rules: relative GET addresses to existing endpoints only. */
export const linksFor = (type: string, data: JsonObject): Record<string, string> => {
  const rule = linkRuleOf(type);
  return linksOf(rule, rule === null ? undefined : data[rule.key]);
};

export const envelopeOf = (fields: { id: string; type: string; micros: number; workspaceId: string; data: JsonObject }): Envelope => ({
  id: fields.id,
  type: fields.type,
  timestamp: isoMicros(fields.micros),
  workspace_id: fields.workspaceId,
  data: fields.data,
  _links: linksFor(fields.type, fields.data),
});

/** The envelope of a sequenced public event; its timestamp is its offset. */
export const toEnvelope = (record: RecordedEvent): Envelope => {
  if (record.offset === null) throw new Error(`event ${record.id} has no offset: not a sequenced public event`);
  return envelopeOf({ id: record.id, type: record.type, micros: record.offset, workspaceId: record.workspaceId, data: record.data });
};
