// The message read model: one row per message, listed per ticket in creation order.
import type { SenderType } from '../src/domain/catalogue.js';
import type { MediaItem } from '../src/domain/ticket/commands.js';
import { REACTION_WITHDRAWN } from '../src/domain/ticket/state.js';
import { textOf, type DocumentProjection } from './tickets-store.js';

export interface Reaction {
  readonly reactor_kind: string;
  readonly reactor_id: string;
  readonly emoji: string;
}

export interface MessageRow {
  readonly id: string;
  readonly ticket_id: string;
  readonly sender_type: SenderType;
  readonly sender_id: string | null;
  readonly sender_name: string | null;
  readonly content: string;
  readonly is_internal: boolean;
  readonly media: readonly MediaItem[];
  readonly created_at: string;
  readonly edited_at: string | null;
  readonly reactions: readonly Reaction[];
}

const withoutReactor = (row: MessageRow, reactorId: unknown): readonly Reaction[] => row.reactions.filter((r) => r.reactor_id !== reactorId);

export const messageProjection: DocumentProjection<MessageRow> = {
  name: 'ticket-messages',
  version: 1,
  types: ['message.created', 'message.edited', 'message.reaction.added', 'message.reaction.removed', REACTION_WITHDRAWN],
  filters: [],
  keyOf: ({ data }) => textOf(data['message_id']),
  evolve(row, { type, data }) {
    if (type === 'message.created') {
      return {
        id: String(data['message_id']),
        ticket_id: String(data['ticket_id']),
        sender_type: data['sender_type'] as SenderType,
        sender_id: textOf(data['sender_id']),
        sender_name: textOf(data['sender_name']),
        content: String(data['content']),
        is_internal: data['is_internal'] === true,
        media: (data['media'] ?? []) as unknown as MediaItem[],
        created_at: String(data['created_at']),
        edited_at: null,
        reactions: [],
      };
    }
    if (row === undefined) return undefined;
    switch (type) {
      case 'message.edited':
        return { ...row, content: String(data['content']), edited_at: textOf(data['edited_at']) };
      case 'message.reaction.added': {
        const reaction = { reactor_kind: String(data['reactor_kind']), reactor_id: String(data['reactor_id']), emoji: String(data['emoji']) };
        return { ...row, reactions: [...withoutReactor(row, data['reactor_id']), reaction] };
      }
      case 'message.reaction.removed':
      case REACTION_WITHDRAWN:
        return { ...row, reactions: withoutReactor(row, data['reactor_id']) };
      default:
        return row;
    }
  },
  partitionOf: (row) => row.ticket_id,
};
