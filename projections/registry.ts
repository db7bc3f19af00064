// Every read model of the tickets feature, for the service and for scripts/rebuild.ts: a rebuild
// opens each projection's store, feeds it the log (types filtered) through `applier`, and compares
// `dump()` with the running service's stores.
import { contactProjection } from './contacts.js';
import { messageProjection } from './tickets-messages.js';
import { ticketProjection } from './tickets.js';
import type { DocumentProjection } from './tickets-store.js';

export const TICKET_PROJECTIONS = {
  tickets: ticketProjection,
  messages: messageProjection,
  contacts: contactProjection,
} as const;

export const PROJECTIONS: readonly DocumentProjection<unknown>[] = Object.values(TICKET_PROJECTIONS) as DocumentProjection<unknown>[];
