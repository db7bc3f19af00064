// The tickets feature's public routes as the API document describes them (src/http/operations.ts):
// the codecs the handlers decode with and answer in.
import * as t from 'io-ts';
import { answer, refusal, type Operation } from '../http/operations.js';
import { ContactInput, CreateTicket, InboundMessage, MessageBody, PageQuery, PatchTicket, RateTicket, TicketListQuery } from './codecs.js';
import { ContactView, MessageView, PageOf, TicketView } from './views.js';

const ticketNotFound = refusal(404, 'business', 'TICKET_NOT_FOUND: no such ticket in this workspace');
const noIdentity = refusal(400, 'short', 'The contact has neither telegram_id nor email');
const refused = refusal(403, 'business', 'TICKET_LIMIT_REACHED (the plan\'s monthly tickets) or CONTACT_BLOCKED');
const ticket = (status: number, description: string) => answer(status, description, TicketView);

export const ticketOperations: readonly Operation[] = [
  { method: 'post', path: '/tickets', summary: 'Open a ticket for a contact (found or created), with an optional first message', body: CreateTicket, answers: [ticket(201, 'The ticket'), noIdentity, refused, refusal(422, 'business', 'VALIDATION_ERROR (a media id of another workspace) or MESSAGE_EMPTY')] },
  { method: 'get', path: '/tickets', summary: 'List tickets, newest first', query: TicketListQuery, answers: [answer(200, 'A page of tickets', PageOf(TicketView))] },
  { method: 'get', path: '/tickets/:id', summary: 'Read one ticket', answers: [ticket(200, 'The ticket'), ticketNotFound] },
  { method: 'patch', path: '/tickets/:id', summary: 'Change subject, priority or status', body: PatchTicket, answers: [ticket(200, 'The ticket'), ticketNotFound, refusal(422, 'business', 'TICKET_INVALID_STATUS_TRANSITION')] },
  { method: 'post', path: '/tickets/:id/close', summary: 'Close a ticket', answers: [ticket(200, 'The ticket'), ticketNotFound, refusal(409, 'business', 'TICKET_ALREADY_CLOSED')] },
  { method: 'post', path: '/tickets/:id/reopen', summary: 'Reopen a resolved or closed ticket', answers: [ticket(200, 'The ticket'), ticketNotFound, refusal(422, 'business', 'TICKET_INVALID_STATUS_TRANSITION')] },
  { method: 'post', path: '/tickets/:id/rate', summary: 'Rate a ticket', body: RateTicket, answers: [ticket(200, 'The ticket'), ticketNotFound] },
  { method: 'post', path: '/tickets/:id/messages', summary: "Post a message as the workspace's bot", body: MessageBody, answers: [answer(201, 'The message', MessageView), ticketNotFound, refusal(422, 'business', 'MESSAGE_EMPTY, or VALIDATION_ERROR for a media id of another workspace')] },
  { method: 'get', path: '/tickets/:id/messages', summary: "A ticket's messages, oldest first", query: PageQuery, answers: [answer(200, 'A page of messages', PageOf(MessageView)), ticketNotFound] },
  {
    method: 'post',
    path: '/messages',
    summary: "A contact's text message, into a given ticket or the contact's newest open one (opened when none)",
    body: InboundMessage,
    answers: [answer(200, 'The message (its id alone when the read model has not caught up)', t.union([MessageView, t.type({ id: t.string })])), noIdentity, refused, ticketNotFound],
  },
  { method: 'post', path: '/contacts', summary: 'Create or update a contact by telegram_id or email', body: ContactInput, answers: [answer(201, 'The contact, new or existing', ContactView), noIdentity] },
  { method: 'get', path: '/contacts/:id', summary: 'Read one contact', answers: [answer(200, 'The contact', ContactView), refusal(404, 'business', 'CONTACT_NOT_FOUND')] },
];
