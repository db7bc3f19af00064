// Ticket use cases over the aggregates: open a ticket (contact upsert, blocked check, monthly quota,
// create), run any ticket command, post a message (attachments checked), and the inbound contact
// message that lands in the contact's open ticket. Each answers after the read models have the
// write (read-your-writes).
import { left, right, type Either } from 'fp-ts/lib/Either.js';
import type { Appender, CommandResult } from '../app/command-handler.js';
import type { Core } from '../app/core.js';
import type { RequestScope } from '../app/request-scope.js';
import type { TicketPriority } from '../domain/catalogue.js';
import type { ContactFields } from '../domain/contact/contact.js';
import { domainError, type DomainError } from '../domain/errors.js';
import type { MediaItem, NewMessage, TicketCommand } from '../domain/ticket/commands.js';
import { isEmptyMessage } from '../domain/ticket/messages.js';
import { monthOf } from '../domain/ticket/quota.js';
import type { TicketState } from '../domain/ticket/state.js';
import { ticketAggregate, ticketStream } from '../domain/ticket/ticket.js';
import type { WorkspaceRow } from '../../projections/workspace-directory.js';
import type { ContactCommands } from './contacts.js';
import type { MediaLinks } from '../media/signed-links.js';
import { createKeyedLock } from '../shared/keyed-lock.js';
import { resolveMedia } from './media.js';
import type { TicketQuota } from './quota.js';
import type { TicketReadModels } from './read-models.js';

type Result<T> = Promise<Either<DomainError, T>>;

/** A ticket command as a caller gives it: the workspace and the time are added here. */
export type TicketRequest = TicketCommand extends infer C ? (C extends unknown ? Omit<C, 'workspaceId' | 'now'> : never) : never;

export interface MessageInput {
  readonly content: string;
  readonly mediaIds: readonly string[];
}

export type Sender = Pick<NewMessage, 'senderType' | 'senderId' | 'senderName' | 'isInternal'>;

export interface OpenTicketInput {
  readonly subject: string | null;
  readonly priority: TicketPriority;
  readonly contact: Partial<ContactFields>;
  readonly message: MessageInput | null;
}

/** An inbound contact message names its ticket or its contact. */
export type InboundInput = { readonly content: string } & ({ readonly ticketId: string } | { readonly contact: Partial<ContactFields> });

/** The plan's month has no ticket left: thrown through the command handler, answered as TICKET_LIMIT_REACHED. */
class MonthUsedUp extends Error {}

const empty = () => left(domainError('MESSAGE_EMPTY', 'A message needs content or media'));

export const createTicketCommands = (core: Core, contacts: ContactCommands, quota: TicketQuota, readModels: TicketReadModels, links: MediaLinks) => {
  const inboundLock = createKeyedLock();

  const run = async (workspaceId: string, command: TicketRequest, scope: RequestScope | undefined, appender?: Appender): Result<CommandResult<TicketState>> => {
    const full = { ...command, workspaceId, now: core.clock() } as TicketCommand;
    const result = await core.handle(ticketAggregate, ticketStream(full.ticketId), workspaceId, full, scope, appender);
    if (result._tag === 'Right') await readModels.settledAfter(result.right.records);
    return result;
  };

  /**
   * The files of an internal note are carried as links signed now and valid 12 hours (spec "Events"
   * notes): made once, here, and recorded in the event, so every delivery and /updates carry them as is.
   */
  const signedForNote = (media: readonly MediaItem[]): MediaItem[] => {
    const expires = links.expiryFrom(core.clock());
    return media.map((item) => ({ ...item, url: links.url(item.id, expires) }));
  };

  const newMessage = async (workspaceId: string, input: MessageInput, sender: Sender, scope: RequestScope | undefined): Result<NewMessage> => {
    if (isEmptyMessage(input.content, input.mediaIds.length)) return empty();
    const media = await resolveMedia(core.log, workspaceId, input.mediaIds);
    if (media._tag === 'Left') return media;
    return right({ messageId: core.resourceId('message', scope), content: input.content, media: sender.isInternal ? signedForNote(media.right) : media.right, ...sender });
  };

  const ticketsPerMonth = (plan: string): number => (core.config.plans[plan] ?? core.config.plans[core.config.defaultPlan])?.ticketsPerMonth ?? 0;

  /** Creates the ticket and counts it against the plan's month, in one commit (quota.countAndAppend). */
  const create = async (
    workspace: WorkspaceRow,
    contactId: string,
    fields: Pick<OpenTicketInput, 'subject' | 'priority'>,
    message: NewMessage | null,
    scope: RequestScope | undefined,
  ): Result<string> => {
    const ticketId = core.resourceId('ticket', scope);
    const limit = ticketsPerMonth(workspace.plan);
    const counted: Appender = async (stream, events, expected) => {
      const appended = await quota.countAndAppend(workspace.id, limit, ticketId, { stream, events, expected }, scope?.claim?.resumed === true);
      if (appended === null) throw new MonthUsedUp();
      return appended;
    };
    try {
      const created = await run(workspace.id, { kind: 'create', ticketId, contactId, ...fields, message }, scope, counted);
      return created._tag === 'Left' ? created : right(ticketId);
    } catch (error) {
      if (!(error instanceof MonthUsedUp)) throw error;
      return left(domainError('TICKET_LIMIT_REACHED', 'The monthly ticket limit of the plan is reached', { plan: workspace.plan, limit, month: monthOf(core.clock()) }));
    }
  };

  /** Upserts the contact and refuses a blocked one. */
  const contactFor = async (workspaceId: string, fields: Partial<ContactFields>, scope: RequestScope | undefined) => {
    const saved = await contacts.save(workspaceId, fields, 'api', scope);
    if (saved._tag === 'Left') return saved;
    if (saved.right.state.blocked) return left(domainError('CONTACT_BLOCKED', 'The contact is blocked', { contact_id: saved.right.contactId }));
    return right({ contactId: saved.right.contactId, name: saved.right.state.fields.full_name });
  };

  const contactSender = (contactId: string, name: string | null): Sender => ({ senderType: 'contact', senderId: contactId, senderName: name, isInternal: false });

  const postMessage = async (workspaceId: string, ticketId: string, input: MessageInput, sender: Sender, scope: RequestScope | undefined): Result<string> => {
    const message = await newMessage(workspaceId, input, sender, scope);
    if (message._tag === 'Left') return message;
    const posted = await run(workspaceId, { kind: 'post_message', ticketId, message: message.right }, scope);
    return posted._tag === 'Left' ? posted : right(message.right.messageId);
  };

  /** The contact's newest ticket that is not closed. */
  const openTicketOf = async (workspaceId: string, contactId: string): Promise<string | null> => {
    for (let page = 1; ; page++) {
      const { items } = await readModels.tickets.list({ partition: workspaceId, where: { contact_id: contactId }, newestFirst: true, page, pageSize: 100 });
      const open = items.find((t) => t.status !== 'closed');
      if (open !== undefined) return open.id;
      if (items.length < 100) return null;
    }
  };

  const inboundByTicket = async (workspaceId: string, ticketId: string, content: string, scope: RequestScope | undefined): Result<string> => {
    const ticket = await readModels.tickets.get(ticketId);
    if (ticket === undefined || ticket.workspace_id !== workspaceId) return left(domainError('TICKET_NOT_FOUND', 'Ticket not found', { ticket_id: ticketId }));
    const contact = await readModels.contacts.get(ticket.contact_id);
    if (contact?.blocked === true) return left(domainError('CONTACT_BLOCKED', 'The contact is blocked', { contact_id: ticket.contact_id }));
    return postMessage(workspaceId, ticketId, { content, mediaIds: [] }, contactSender(ticket.contact_id, contact?.full_name ?? null), scope);
  };

  const inboundByContact = async (workspace: WorkspaceRow, fields: Partial<ContactFields>, content: string, scope: RequestScope | undefined): Result<string> => {
    const contact = await contactFor(workspace.id, fields, scope);
    if (contact._tag === 'Left') return contact;
    const { contactId, name } = contact.right;
    const sender = contactSender(contactId, name);
    // One inbound message at a time per contact, so two first messages do not open two tickets.
    return inboundLock(`${workspace.id}/${contactId}`, async () => {
      const ticketId = await openTicketOf(workspace.id, contactId);
      if (ticketId !== null) return postMessage(workspace.id, ticketId, { content, mediaIds: [] }, sender, scope);
      const message = await newMessage(workspace.id, { content, mediaIds: [] }, sender, scope);
      if (message._tag === 'Left') return message;
      const created = await create(workspace, contactId, { subject: null, priority: 'normal' }, message.right, scope);
      return created._tag === 'Left' ? created : right(message.right.messageId);
    });
  };

  return {
    run,
    postMessage,
    /** POST /tickets: the first message, if any, is the contact's. */
    async open(workspace: WorkspaceRow, input: OpenTicketInput, scope: RequestScope | undefined): Result<string> {
      if (input.message !== null && isEmptyMessage(input.message.content, input.message.mediaIds.length)) return empty();
      const media = await resolveMedia(core.log, workspace.id, input.message?.mediaIds ?? []);
      if (media._tag === 'Left') return media;
      const contact = await contactFor(workspace.id, input.contact, scope);
      if (contact._tag === 'Left') return contact;
      const { contactId, name } = contact.right;
      const message: NewMessage | null =
        input.message === null ? null : { messageId: core.resourceId('message', scope), content: input.message.content, media: media.right, ...contactSender(contactId, name) };
      return create(workspace, contactId, { subject: input.subject, priority: input.priority }, message, scope);
    },
    /** POST /messages: returns the message id. */
    async inbound(workspace: WorkspaceRow, input: InboundInput, scope: RequestScope | undefined): Result<string> {
      if (isEmptyMessage(input.content, 0)) return empty();
      return 'ticketId' in input
        ? inboundByTicket(workspace.id, input.ticketId, input.content, scope)
        : inboundByContact(workspace, input.contact, input.content, scope);
    },
  };
};

export type TicketCommands = ReturnType<typeof createTicketCommands>;
