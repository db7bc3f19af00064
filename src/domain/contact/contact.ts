// The contact aggregate, stream `contact-<id>`: the contact's fields, whether it is blocked, whether
// the widget has identified it (a widget visitor), and when a visitor.reply_waiting was last sent.
// Contacts saved through the API emit only internal events; the widget's identify also emits the
// public contact.created (first time) and contact.identified. visitor.reply_waiting goes only to
// widget visitors, only while the workspace's widget has visitor notifications on, and at most once
// per 5 minutes per visitor (spec "Events").
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../aggregate.js';
import type { JsonObject } from '../../log/event-log.js';
import { isoMicros } from '../envelope.js';
import { domainError, type DomainError } from '../errors.js';
import { internalEvent, publicEvent } from '../ticket/events.js';

export const contactStream = (contactId: string): string => `contact-${contactId}`;

export const CONTACT_REGISTERED = 'contact.registered';
export const CONTACT_CHANGED = 'contact.changed';
export const CONTACT_BLOCKED = 'contact.blocked';
export const CONTACT_UNBLOCKED = 'contact.unblocked';

export const CONTACT_FIELDS = ['internal_id', 'email', 'full_name', 'phone', 'telegram_id'] as const;
export type ContactField = (typeof CONTACT_FIELDS)[number];
export type ContactFields = Readonly<Record<ContactField, string | null>>;

/** At most one visitor.reply_waiting per visitor in this interval (spec "Limits"). */
export const REPLY_WAITING_INTERVAL_US = 5 * 60 * 1_000_000;

export interface ContactState {
  readonly exists: boolean;
  readonly workspaceId: string;
  readonly fields: ContactFields;
  readonly blocked: boolean;
  /** Identified by the widget at least once (contacts of other channels are not widget visitors). */
  readonly widgetVisitor: boolean;
  readonly lastReplyWaitingUs: number | null;
}

const noFields: ContactFields = { internal_id: null, email: null, full_name: null, phone: null, telegram_id: null };

const initial: ContactState = { exists: false, workspaceId: '', fields: noFields, blocked: false, widgetVisitor: false, lastReplyWaitingUs: null };

interface Base {
  readonly contactId: string;
  readonly workspaceId: string;
  readonly now: number;
}

export interface ReplyWaiting {
  readonly ticketId: string;
  readonly messageId: string;
  readonly operatorName: string;
  readonly preview: string;
  readonly locale: string;
  readonly surface: string;
  readonly openUrl: string;
  /** The workspace's widget setting (domain/widget), read by the caller when the command is made. */
  readonly visitorNotifications: boolean;
}

/** Why no visitor.reply_waiting was sent. */
export type ReplyWaitingHeld = 'visitor_notifications_disabled' | 'not_a_widget_visitor' | 'sent_within_5_minutes';

export type ContactCommand = Base &
  (
    | { readonly kind: 'save'; readonly fields: Partial<ContactFields>; readonly via: 'api' | 'widget' }
    | { readonly kind: 'set_blocked'; readonly blocked: boolean }
    | ({ readonly kind: 'reply_waiting' } & ReplyWaiting)
  );

/** Inverse of isoMicros (2026-11-21T22:47:15.123456+00:00 → µs). */
const microsOfIso = (iso: string): number => Date.parse(`${iso.slice(0, 19)}Z`) * 1000 + Number(iso.slice(20, 26));

const pickFields = (data: JsonObject): Partial<ContactFields> =>
  Object.fromEntries(CONTACT_FIELDS.filter((f) => f in data).map((f) => [f, typeof data[f] === 'string' ? data[f] : null]));

const evolve: Aggregate<ContactState, ContactCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case CONTACT_REGISTERED:
      return { ...state, exists: true, workspaceId: String(data['workspace_id']), fields: { ...noFields, ...pickFields(data) } };
    case CONTACT_CHANGED:
      return { ...state, fields: { ...state.fields, ...pickFields(data) } };
    case CONTACT_BLOCKED:
    case CONTACT_UNBLOCKED:
      return { ...state, blocked: type === CONTACT_BLOCKED };
    case 'contact.identified':
      return { ...state, widgetVisitor: true };
    case 'visitor.reply_waiting':
      return { ...state, lastReplyWaitingUs: microsOfIso(String(data['replied_at'])) };
    default:
      return state;
  }
};

const save = (c: Extract<ContactCommand, { kind: 'save' }>, state: ContactState): Decided[] => {
  const given = Object.fromEntries(Object.entries(c.fields).filter(([, v]) => v !== undefined)) as Partial<ContactFields>;
  const fields: ContactFields = { ...state.fields, ...given };
  const changes = Object.fromEntries(Object.entries(given).filter(([k, v]) => state.fields[k as ContactField] !== v));
  const internal = !state.exists
    ? [internalEvent(CONTACT_REGISTERED, { contact_id: c.contactId, workspace_id: c.workspaceId, ...fields, created_at: isoMicros(c.now) })]
    : Object.keys(changes).length > 0
      ? [internalEvent(CONTACT_CHANGED, { contact_id: c.contactId, ...changes })]
      : [];
  if (c.via === 'api') return internal;
  const data = { id: c.contactId, ...fields };
  return [...internal, ...(state.exists ? [] : [publicEvent('contact.created', data)]), publicEvent('contact.identified', data)];
};

type ReplyWaitingCommand = Extract<ContactCommand, { kind: 'reply_waiting' }>;

/** Why the command sends no visitor.reply_waiting to the contact, or null when it sends one. */
export const replyWaitingHeld = (c: Pick<ReplyWaitingCommand, 'now' | 'visitorNotifications'>, state: ContactState): ReplyWaitingHeld | null => {
  if (!c.visitorNotifications) return 'visitor_notifications_disabled';
  if (!state.widgetVisitor) return 'not_a_widget_visitor';
  if (state.lastReplyWaitingUs !== null && c.now - state.lastReplyWaitingUs < REPLY_WAITING_INTERVAL_US) return 'sent_within_5_minutes';
  return null;
};

const replyWaiting = (c: ReplyWaitingCommand, state: ContactState): Decided[] => {
  if (replyWaitingHeld(c, state) !== null) return [];
  return [
    publicEvent('visitor.reply_waiting', {
      contact_id: c.contactId,
      external_id: state.fields.internal_id,
      telegram_user_id: state.fields.telegram_id,
      ticket_id: c.ticketId,
      ticket_short_id: c.ticketId.slice(0, 8),
      message_id: c.messageId,
      operator_name: c.operatorName,
      preview: c.preview,
      locale: c.locale,
      surface: c.surface,
      open_url: c.openUrl,
      replied_at: isoMicros(c.now),
    }),
  ];
};

const decide = (c: ContactCommand, state: ContactState): Either<DomainError, readonly Decided[]> => {
  if (c.kind === 'save' && !state.exists) return right(save(c, state));
  if (!state.exists || state.workspaceId !== c.workspaceId) return left(domainError('CONTACT_NOT_FOUND', 'Contact not found', { contact_id: c.contactId }));
  switch (c.kind) {
    case 'save':
      return right(save(c, state));
    case 'set_blocked':
      return right(state.blocked === c.blocked ? [] : [internalEvent(c.blocked ? CONTACT_BLOCKED : CONTACT_UNBLOCKED, { contact_id: c.contactId })]);
    case 'reply_waiting':
      return right(replyWaiting(c, state));
  }
};

export const contactAggregate: Aggregate<ContactState, ContactCommand> = { initial, evolve, decide };
