// The ticket status transition table (DESIGN.md leaves it to the domain). PATCH may move a ticket
// along these edges; a status equal to the current one is no change. `new` is only ever the first
// status. A closed ticket leaves `closed` only through reopen; reopen works from resolved or closed.
import type { TicketStatus } from '../catalogue.js';

export const PATCH_TRANSITIONS: Readonly<Record<TicketStatus, readonly TicketStatus[]>> = {
  new: ['open', 'in_progress', 'pending', 'resolved', 'closed'],
  open: ['in_progress', 'pending', 'resolved', 'closed'],
  in_progress: ['open', 'pending', 'resolved', 'closed'],
  pending: ['open', 'in_progress', 'resolved', 'closed'],
  resolved: ['open', 'closed'],
  closed: [],
};

export const REOPENABLE: readonly TicketStatus[] = ['resolved', 'closed'];

/** The status a reopened ticket gets. */
export const REOPENED_STATUS: TicketStatus = 'open';

/** A contact's reply brings a ticket waiting on them, or one marked solved, back to `open`. */
export const REOPENED_BY_CONTACT_REPLY: readonly TicketStatus[] = ['pending', 'resolved'];

export const canPatch = (from: TicketStatus, to: TicketStatus): boolean => from === to || PATCH_TRANSITIONS[from].includes(to);
