// Ticket state as the aggregate folds it from stream `ticket-<id>`: status, assignment, creation time
// and the ticket's messages (edits and reactions are decided against the message).
import type { Aggregate } from '../aggregate.js';
import type { Json, JsonObject } from '../../log/event-log.js';
import type { SenderType, TicketPriority, TicketStatus } from '../catalogue.js';
import { emptyMap, getEntry, setEntry, type PersistentMap } from '../persistent-map.js';

/** Internal: everything the ticket's read model and aggregate need that ticket.created leaves out. */
export const TICKET_OPENED = 'ticket.opened';
/** Internal: the new values of a change whose public ticket.updated carries only ids. */
export const TICKET_CHANGED = 'ticket.changed';
/** Internal: an operator's reaction taken back; the catalogue's message.reaction.removed is a widget visitor's only. */
export const REACTION_WITHDRAWN = 'message.reaction.withdrawn';

export type ReactorKind = 'visitor' | 'operator';

export interface MessageState {
  readonly senderType: SenderType;
  readonly senderId: string | null;
  readonly isInternal: boolean;
  readonly content: string;
  readonly hasMedia: boolean;
  /** reactor_id → its reaction: one per reactor and message. */
  readonly reactions: Readonly<Record<string, { readonly emoji: string; readonly kind: ReactorKind }>>;
}

export interface TicketState {
  readonly exists: boolean;
  readonly workspaceId: string;
  readonly contactId: string;
  readonly createdUs: number;
  readonly status: TicketStatus;
  readonly subject: string | null;
  readonly priority: TicketPriority;
  readonly operatorId: string | null;
  /** By message id; a persistent map, so a message.created costs the same on a ticket of 10 messages and of 10,000. */
  readonly messages: PersistentMap<MessageState>;
}

export const initialTicket: TicketState = {
  exists: false,
  workspaceId: '',
  contactId: '',
  createdUs: 0,
  status: 'new',
  subject: null,
  priority: 'normal',
  operatorId: null,
  messages: emptyMap(),
};

/** A system message is a bot message without a sender; it cannot be edited. */
export const isSystemMessage = (m: MessageState): boolean => m.senderType === 'bot' && m.senderId === null;

const str = (v: Json | undefined): string => String(v);
const strOrNull = (v: Json | undefined): string | null => (typeof v === 'string' ? v : null);

const withMessage = (state: TicketState, id: string, change: (m: MessageState) => MessageState): TicketState => {
  const message = getEntry(state.messages, id);
  return message === undefined ? state : { ...state, messages: setEntry(state.messages, id, change(message)) };
};

const changed = (state: TicketState, data: JsonObject): TicketState => ({
  ...state,
  ...('subject' in data ? { subject: strOrNull(data['subject']) } : {}),
  ...('priority' in data ? { priority: data['priority'] as TicketPriority } : {}),
  ...('status' in data ? { status: data['status'] as TicketStatus } : {}),
});

export const evolveTicket: Aggregate<TicketState, unknown>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case TICKET_OPENED:
      return {
        ...state,
        exists: true,
        workspaceId: str(data['workspace_id']),
        contactId: str(data['contact_id']),
        createdUs: Number(data['created_us']),
        status: data['status'] as TicketStatus,
        subject: strOrNull(data['subject']),
        priority: data['priority'] as TicketPriority,
      };
    case TICKET_CHANGED:
      return changed(state, data);
    case 'ticket.assigned':
      return { ...state, operatorId: str(data['operator_id']), status: data['status'] as TicketStatus };
    case 'ticket.transferred':
      return { ...state, operatorId: strOrNull(data['operator_id']) };
    case 'ticket.force_taken':
      return { ...state, operatorId: str(data['operator_id']) };
    case 'ticket.closed':
      return { ...state, status: 'closed' };
    case 'ticket.reopened':
      return { ...state, status: data['status'] as TicketStatus };
    case 'message.created': {
      const message: MessageState = {
        senderType: data['sender_type'] as SenderType,
        senderId: strOrNull(data['sender_id']),
        isInternal: data['is_internal'] === true,
        content: str(data['content']),
        hasMedia: Array.isArray(data['media']) && data['media'].length > 0,
        reactions: {},
      };
      return { ...state, messages: setEntry(state.messages, str(data['message_id']), message) };
    }
    case 'message.edited':
      return withMessage(state, str(data['message_id']), (m) => ({ ...m, content: str(data['content']) }));
    case 'message.reaction.added': {
      const reaction = { emoji: str(data['emoji']), kind: data['reactor_kind'] === 'operator' ? ('operator' as const) : ('visitor' as const) };
      return withMessage(state, str(data['message_id']), (m) => ({ ...m, reactions: { ...m.reactions, [str(data['reactor_id'])]: reaction } }));
    }
    case 'message.reaction.removed':
    case REACTION_WITHDRAWN:
      return withMessage(state, str(data['message_id']), (m) => {
        const { [str(data['reactor_id'])]: _removed, ...rest } = m.reactions;
        return { ...m, reactions: rest };
      });
    default:
      return state;
  }
};
