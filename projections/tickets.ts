// The ticket read model: one row per ticket, listed per workspace by status and contact.
import type { TicketPriority, TicketStatus } from '../src/domain/catalogue.js';
import { TICKET_CHANGED, TICKET_OPENED } from '../src/domain/ticket/state.js';
import type { JsonObject } from '../src/log/event-log.js';
import { textOf, type DocumentProjection } from './tickets-store.js';

export interface TicketRow {
  readonly id: string;
  readonly workspace_id: string;
  readonly contact_id: string;
  readonly subject: string | null;
  readonly status: TicketStatus;
  readonly priority: TicketPriority;
  readonly last_message_id: string | null;
  readonly last_message_preview: string | null;
  readonly rating: number | null;
  readonly rating_comment: string | null;
  readonly operator_id: string | null;
  readonly department_id: string | null;
  readonly created_at: string;
  readonly closed_at: string | null;
}

const PREVIEW_LENGTH = 200;

export const previewOf = (content: string): string => content.slice(0, PREVIEW_LENGTH);

const changedFields = (data: JsonObject): Partial<TicketRow> => ({
  ...('subject' in data ? { subject: textOf(data['subject']) } : {}),
  ...('priority' in data ? { priority: data['priority'] as TicketPriority } : {}),
  ...('status' in data ? { status: data['status'] as TicketStatus } : {}),
});

const evolveRow = (row: TicketRow, type: string, data: JsonObject): TicketRow => {
  switch (type) {
    case TICKET_CHANGED:
      return { ...row, ...changedFields(data) };
    case 'ticket.assigned':
      return { ...row, operator_id: textOf(data['operator_id']), status: data['status'] as TicketStatus };
    case 'ticket.transferred':
      return { ...row, department_id: textOf(data['department_id']), operator_id: textOf(data['operator_id']) };
    case 'ticket.force_taken':
      return { ...row, operator_id: textOf(data['operator_id']) };
    case 'ticket.closed':
      return { ...row, status: 'closed', closed_at: textOf(data['closed_at']) };
    case 'ticket.reopened':
      return { ...row, status: data['status'] as TicketStatus, closed_at: null };
    case 'ticket.rated':
      return { ...row, rating: Number(data['rating']), rating_comment: 'comment' in data ? textOf(data['comment']) : row.rating_comment };
    case 'message.created':
      // Internal notes are not what the contact last saw or wrote.
      return data['is_internal'] === true ? row : { ...row, last_message_id: textOf(data['message_id']), last_message_preview: previewOf(String(data['content'])) };
    case 'message.edited':
      return data['message_id'] === row.last_message_id ? { ...row, last_message_preview: previewOf(String(data['content'])) } : row;
    default:
      return row;
  }
};

export const ticketProjection: DocumentProjection<TicketRow> = {
  name: 'tickets',
  version: 1,
  types: [TICKET_OPENED, TICKET_CHANGED, 'ticket.assigned', 'ticket.transferred', 'ticket.force_taken', 'ticket.closed', 'ticket.reopened', 'ticket.rated', 'message.created', 'message.edited'],
  filters: ['status', 'contact_id'],
  keyOf: ({ data }) => textOf(data['ticket_id']),
  evolve(row, { type, data }) {
    if (type === TICKET_OPENED) {
      return {
        id: String(data['ticket_id']),
        workspace_id: String(data['workspace_id']),
        contact_id: String(data['contact_id']),
        subject: textOf(data['subject']),
        status: data['status'] as TicketStatus,
        priority: data['priority'] as TicketPriority,
        last_message_id: null,
        last_message_preview: null,
        rating: null,
        rating_comment: null,
        operator_id: null,
        department_id: null,
        created_at: String(data['created_at']),
        closed_at: null,
      };
    }
    return row === undefined ? undefined : evolveRow(row, type, data);
  },
  partitionOf: (row) => row.workspace_id,
};
