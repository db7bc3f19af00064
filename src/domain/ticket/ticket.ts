// The ticket aggregate, stream `ticket-<id>`: lifecycle (create, PATCH, close, reopen, rate),
// assignment (assign, transfer, force take) and the ticket's messages (messages.ts).
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../aggregate.js';
import type { JsonObject } from '../../log/event-log.js';
import { isoMicros } from '../envelope.js';
import { domainError, type DomainError } from '../errors.js';
import type { CommandOf, TicketCommand } from './commands.js';
import { internalEvent, publicEvent, ticketUpdated } from './events.js';
import { decideAddReaction, decideEditMessage, decidePostMessage, decideRemoveReaction, isEmptyMessage, messageCreated } from './messages.js';
import { evolveTicket, initialTicket, TICKET_CHANGED, TICKET_OPENED, type TicketState } from './state.js';
import { canPatch, REOPENABLE, REOPENED_STATUS } from './transitions.js';

export const ticketStream = (ticketId: string): string => `ticket-${ticketId}`;

type Decision = Either<DomainError, readonly Decided[]>;

const invalidTransition = (ticketId: string, from: string, to: string) =>
  left(domainError('TICKET_INVALID_STATUS_TRANSITION', `A ticket cannot go from ${from} to ${to}`, { ticket_id: ticketId, from, to }));

const closedEvent = (ticketId: string, state: TicketState, now: number): Decided =>
  publicEvent('ticket.closed', { ticket_id: ticketId, closed_at: isoMicros(now), resolution_secs: Math.max(0, Math.floor((now - state.createdUs) / 1_000_000)) });

const create = (c: CommandOf<'create'>, state: TicketState): Decision => {
  if (state.exists) return left(domainError('CONFLICT', 'This ticket id is already used', { ticket_id: c.ticketId }));
  if (c.message !== null && isEmptyMessage(c.message.content, c.message.media.length)) return left(domainError('MESSAGE_EMPTY', 'A message needs content or media'));
  const fields = { ticket_id: c.ticketId, status: 'new' as const, priority: c.priority, contact_id: c.contactId, subject: c.subject };
  return right([
    internalEvent(TICKET_OPENED, { ...fields, workspace_id: c.workspaceId, created_at: isoMicros(c.now), created_us: c.now }),
    publicEvent('ticket.created', fields),
    ...(c.message === null ? [] : [messageCreated(c.ticketId, c.message, c.now)]),
  ]);
};

const update = (c: CommandOf<'update'>, state: TicketState): Decision => {
  if (c.status !== undefined && !canPatch(state.status, c.status)) return invalidTransition(c.ticketId, state.status, c.status);
  const changes: Record<string, string | null> = {};
  if (c.subject !== undefined && c.subject !== state.subject) changes['subject'] = c.subject;
  if (c.priority !== undefined && c.priority !== state.priority) changes['priority'] = c.priority;
  if (c.status !== undefined && c.status !== state.status) changes['status'] = c.status;
  if (Object.keys(changes).length === 0) return right([]);
  return right([
    internalEvent(TICKET_CHANGED, { ticket_id: c.ticketId, ...changes }),
    ticketUpdated(c.ticketId, state.workspaceId),
    ...(changes['status'] === 'closed' ? [closedEvent(c.ticketId, state, c.now)] : []),
  ]);
};

const close = (c: CommandOf<'close'>, state: TicketState): Decision =>
  state.status === 'closed'
    ? left(domainError('TICKET_ALREADY_CLOSED', 'The ticket is already closed', { ticket_id: c.ticketId }))
    : right([closedEvent(c.ticketId, state, c.now)]);

const reopen = (c: CommandOf<'reopen'>, state: TicketState): Decision =>
  REOPENABLE.includes(state.status)
    ? right([publicEvent('ticket.reopened', { ticket_id: c.ticketId, status: REOPENED_STATUS })])
    : invalidTransition(c.ticketId, state.status, REOPENED_STATUS);

const rate = (c: CommandOf<'rate'>): Decision => {
  if (!Number.isInteger(c.rating) || c.rating < 1 || c.rating > 5) {
    return left(domainError('VALIDATION_ERROR', 'The rating must be an integer from 1 to 5', { field: 'rating', reason: 'out_of_range' }));
  }
  return right([publicEvent('ticket.rated', { ticket_id: c.ticketId, rating: c.rating, ...(c.comment === undefined ? {} : { comment: c.comment }) })]);
};

/** Assignment moves a ticket nobody works on yet to in_progress. */
const ASSIGNED_STATUS: Partial<Record<TicketState['status'], TicketState['status']>> = { new: 'in_progress', open: 'in_progress' };

const assignment = (c: TicketCommand, state: TicketState, decide: () => Decision): Decision =>
  state.status === 'closed' ? invalidTransition(c.ticketId, 'closed', c.kind) : decide();

const assign = (c: CommandOf<'assign'>, state: TicketState): Decision =>
  assignment(c, state, () => {
    const status = ASSIGNED_STATUS[state.status] ?? state.status;
    const data: JsonObject = { operator_id: c.operatorId, status };
    return right([
      publicEvent('ticket.assigned', { ticket_id: c.ticketId, operator_id: c.operatorId, operator_name: c.operatorName, operator_avatar_url: c.operatorAvatarUrl, status }),
      ticketUpdated(c.ticketId, state.workspaceId, data),
    ]);
  });

const transfer = (c: CommandOf<'transfer'>, state: TicketState): Decision =>
  assignment(c, state, () =>
    right([
      publicEvent('ticket.transferred', {
        ticket_id: c.ticketId,
        department_id: c.departmentId,
        department_name: c.departmentName,
        operator_id: c.operatorId,
        operator_name: c.operatorName,
      }),
    ]),
  );

const forceTake = (c: CommandOf<'force_take'>, state: TicketState): Decision =>
  assignment(c, state, () =>
    state.operatorId === null || state.operatorId === c.operatorId
      ? left(domainError('VALIDATION_ERROR', 'The ticket is not assigned to another operator', { field: 'operator_id', reason: 'not_assigned_to_another' }))
      : right([publicEvent('ticket.force_taken', { ticket_id: c.ticketId, operator_id: c.operatorId, previous_operator_id: state.operatorId })]),
  );

const decide = (c: TicketCommand, state: TicketState): Decision => {
  if (c.kind === 'create') return create(c, state);
  // Another workspace's ticket does not exist for the caller.
  if (!state.exists || state.workspaceId !== c.workspaceId) return left(domainError('TICKET_NOT_FOUND', 'Ticket not found', { ticket_id: c.ticketId }));
  switch (c.kind) {
    case 'update':
      return update(c, state);
    case 'close':
      return close(c, state);
    case 'reopen':
      return reopen(c, state);
    case 'rate':
      return rate(c);
    case 'assign':
      return assign(c, state);
    case 'transfer':
      return transfer(c, state);
    case 'force_take':
      return forceTake(c, state);
    case 'post_message':
      return decidePostMessage(c, state);
    case 'edit_message':
      return decideEditMessage(c, state);
    case 'add_reaction':
      return decideAddReaction(c, state);
    case 'remove_reaction':
      return decideRemoveReaction(c, state);
  }
};

export const ticketAggregate: Aggregate<TicketState, TicketCommand> = { initial: initialTicket, evolve: evolveTicket, decide };
