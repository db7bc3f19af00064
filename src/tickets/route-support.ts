// What the tickets feature's routes share: their dependencies and the reads that answer 404.
import type { Either } from 'fp-ts/lib/Either.js';
import type { Core } from '../app/core.js';
import { domainError, type DomainError } from '../domain/errors.js';
import { business } from '../http/api-error.js';
import type { ContactCommands } from './contacts.js';
import type { TicketReadModels } from './read-models.js';
import type { TicketCommands } from './ticket-commands.js';

export interface TicketRouteDeps {
  readonly core: Core;
  readonly commands: TicketCommands;
  readonly contacts: ContactCommands;
  readonly readModels: TicketReadModels;
}

/** The Right value, or the business error thrown for the error middleware to render. */
export const unwrap = <T>(result: Either<DomainError, T>): T => {
  if (result._tag === 'Left') throw business(result.left);
  return result.right;
};

/** The ticket row of the caller's workspace; another workspace's ticket is not found either. */
export const ticketOf = async (readModels: TicketReadModels, workspaceId: string, ticketId: string) => {
  const row = await readModels.tickets.get(ticketId);
  if (row === undefined || row.workspace_id !== workspaceId) throw business(domainError('TICKET_NOT_FOUND', 'Ticket not found', { ticket_id: ticketId }));
  return row;
};

export const messageOf = async (readModels: TicketReadModels, ticketId: string, messageId: string) => {
  const row = await readModels.messages.get(messageId);
  if (row === undefined || row.ticket_id !== ticketId) throw business(domainError('MESSAGE_NOT_FOUND', 'Message not found', { ticket_id: ticketId, message_id: messageId }));
  return row;
};

export const contactOf = async (readModels: TicketReadModels, workspaceId: string, contactId: string) => {
  const row = await readModels.contacts.get(contactId);
  if (row === undefined || row.workspace_id !== workspaceId) throw business(domainError('CONTACT_NOT_FOUND', 'Contact not found', { contact_id: contactId }));
  return row;
};
