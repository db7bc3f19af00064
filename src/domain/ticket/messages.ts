// Decisions about a ticket's messages: posting (a contact's reply may bring the ticket back to
// `open`), editing and reactions.
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { Decided } from '../aggregate.js';
import { isoMicros } from '../envelope.js';
import { domainError, type DomainError } from '../errors.js';
import type { CommandOf, NewMessage } from './commands.js';
import { internalEvent, publicEvent, ticketUpdated } from './events.js';
import { isSystemMessage, REACTION_WITHDRAWN, TICKET_CHANGED, type MessageState, type TicketState } from './state.js';
import { REOPENED_BY_CONTACT_REPLY } from './transitions.js';
import { ownEntry } from '../own-entry.js';
import { getEntry } from '../persistent-map.js';

type Decision = Either<DomainError, readonly Decided[]>;

export const isEmptyMessage = (content: string, mediaCount: number): boolean => content.trim() === '' && mediaCount === 0;

const empty = () => left(domainError('MESSAGE_EMPTY', 'A message needs content or media'));

export const messageCreated = (ticketId: string, m: NewMessage, now: number): Decided =>
  publicEvent('message.created', {
    id: m.messageId,
    message_id: m.messageId,
    ticket_id: ticketId,
    sender_type: m.senderType,
    sender_id: m.senderId,
    sender_name: m.senderName,
    content: m.content,
    is_internal: m.isInternal,
    media: m.media.map((item) => ({ ...item })),
    created_at: isoMicros(now),
  });

export const decidePostMessage = (c: CommandOf<'post_message'>, state: TicketState): Decision => {
  const m = c.message;
  if (isEmptyMessage(m.content, m.media.length)) return empty();
  if (getEntry(state.messages, m.messageId) !== undefined) return left(domainError('CONFLICT', 'This message id is already used', { message_id: m.messageId }));
  const events = [messageCreated(c.ticketId, m, c.now)];
  if (m.senderType === 'contact' && REOPENED_BY_CONTACT_REPLY.includes(state.status)) {
    events.push(
      internalEvent(TICKET_CHANGED, { ticket_id: c.ticketId, status: 'open' }),
      ticketUpdated(c.ticketId, state.workspaceId, { status: 'open' }),
    );
  }
  return right(events);
};

const withMessage = (state: TicketState, ticketId: string, messageId: string, decide: (m: MessageState) => Decision): Decision => {
  const message = getEntry(state.messages, messageId);
  if (message === undefined) return left(domainError('MESSAGE_NOT_FOUND', 'Message not found', { ticket_id: ticketId, message_id: messageId }));
  return decide(message);
};

export const decideEditMessage = (c: CommandOf<'edit_message'>, state: TicketState): Decision =>
  withMessage(state, c.ticketId, c.messageId, (m) => {
    if (isSystemMessage(m)) return left(domainError('VALIDATION_ERROR', 'System messages cannot be edited', { field: 'message_id', reason: 'system_message' }));
    if (isEmptyMessage(c.content, m.hasMedia ? 1 : 0)) return empty();
    if (c.content === m.content) return right([]);
    return right([
      publicEvent('message.edited', {
        id: c.messageId,
        message_id: c.messageId,
        ticket_id: c.ticketId,
        content: c.content,
        is_internal: m.isInternal,
        edited_at: isoMicros(c.now),
      }),
    ]);
  });

export const decideAddReaction = (c: CommandOf<'add_reaction'>, state: TicketState): Decision =>
  withMessage(state, c.ticketId, c.messageId, (m) =>
    right(
      ownEntry(m.reactions, c.reactorId)?.emoji === c.emoji
        ? []
        : [publicEvent('message.reaction.added', { message_id: c.messageId, reactor_kind: c.reactorKind, reactor_id: c.reactorId, emoji: c.emoji })],
    ),
  );

/** The catalogue's message.reaction.removed is for a widget visitor's reaction; an operator's is taken back internally. */
export const decideRemoveReaction = (c: CommandOf<'remove_reaction'>, state: TicketState): Decision =>
  withMessage(state, c.ticketId, c.messageId, (m) => {
    const reaction = ownEntry(m.reactions, c.reactorId);
    const data = { message_id: c.messageId, reactor_id: c.reactorId };
    if (reaction === undefined) return right([]);
    return right([reaction.kind === 'visitor' ? publicEvent('message.reaction.removed', data) : internalEvent(REACTION_WITHDRAWN, data)]);
  });
