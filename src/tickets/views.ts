// Response bodies: read-model rows without their bookkeeping fields, and list pages. Each view's
// shape is a codec, which types the view function and describes the answer in the API document.
import * as t from 'io-ts';
import type { ContactRow } from '../../projections/contacts.js';
import type { MessageRow } from '../../projections/tickets-messages.js';
import type { TicketRow } from '../../projections/tickets.js';
import type { Page } from '../../projections/tickets-store.js';
import { SenderType, TicketPriority, TicketStatus } from '../domain/catalogue.js';

const nullableStr = t.union([t.string, t.null]);

export const TicketView = t.type({
  id: t.string,
  contact_id: t.string,
  subject: nullableStr,
  status: TicketStatus,
  priority: TicketPriority,
  last_message_preview: nullableStr,
  rating: t.union([t.number, t.null]),
  rating_comment: nullableStr,
  operator_id: nullableStr,
  department_id: nullableStr,
  created_at: t.string,
  closed_at: nullableStr,
});

export const MessageView = t.type({
  id: t.string,
  ticket_id: t.string,
  sender_type: SenderType,
  sender_id: nullableStr,
  sender_name: nullableStr,
  content: t.string,
  is_internal: t.boolean,
  media: t.readonlyArray(t.type({ id: t.string, url: t.string, file_name: t.string, content_type: t.string, size: t.number })),
  created_at: t.string,
  edited_at: nullableStr,
  reactions: t.readonlyArray(t.type({ reactor_kind: t.string, reactor_id: t.string, emoji: t.string })),
});

export const ContactView = t.type({
  id: t.string,
  internal_id: nullableStr,
  email: nullableStr,
  full_name: nullableStr,
  phone: nullableStr,
  telegram_id: nullableStr,
  is_blocked: t.boolean,
  created_at: t.string,
});

/** A list page of `item`s. */
export const PageOf = <C extends t.Mixed>(item: C) => t.type({ items: t.array(item), page: t.number, page_size: t.number, total: t.number });

export const ticketView = (row: TicketRow): t.TypeOf<typeof TicketView> => ({
  id: row.id,
  contact_id: row.contact_id,
  subject: row.subject,
  status: row.status,
  priority: row.priority,
  last_message_preview: row.last_message_preview,
  rating: row.rating,
  rating_comment: row.rating_comment,
  operator_id: row.operator_id,
  department_id: row.department_id,
  created_at: row.created_at,
  closed_at: row.closed_at,
});

export const messageView = (row: MessageRow): t.TypeOf<typeof MessageView> => ({ ...row });

export const contactView = (row: ContactRow): t.TypeOf<typeof ContactView> => ({
  id: row.id,
  internal_id: row.internal_id,
  email: row.email,
  full_name: row.full_name,
  phone: row.phone,
  telegram_id: row.telegram_id,
  is_blocked: row.blocked,
  created_at: row.created_at,
});

export const pageView = <D, V>(page: Page<D>, query: { page: number; pageSize: number }, view: (d: D) => V) => ({
  items: page.items.map(view),
  page: query.page,
  page_size: query.pageSize,
  total: page.total,
});
