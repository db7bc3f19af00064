// Response bodies: read-model rows without their bookkeeping fields, and list pages.
import type { ContactRow } from '../../projections/contacts.js';
import type { MessageRow } from '../../projections/tickets-messages.js';
import type { TicketRow } from '../../projections/tickets.js';
import type { Page } from '../../projections/tickets-store.js';

export const ticketView = (row: TicketRow) => ({
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

export const messageView = (row: MessageRow) => ({ ...row });

export const contactView = (row: ContactRow) => ({
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
