// Every read model of the tickets feature, for the service and for scripts/rebuild.ts: a rebuild
// creates each projection's store, feeds it the log (types filtered) through `applier`, and
// compares `dump()` with the running service's stores.
import type { Config } from '../src/config/config.js';
import { contactProjection } from './contacts.js';
import { messageProjection } from './tickets-messages.js';
import { ticketProjection } from './tickets.js';
import type { DocumentProjection, DocumentStore } from './tickets-store.js';
import { createMemoryDocumentStore } from './tickets-store-memory.js';

export interface RegisteredProjection<D> {
  readonly projection: DocumentProjection<D>;
  /** The store the embedded mode uses (the composition root picks Redis in the distributed mode). */
  readonly createStore: (config: Config) => DocumentStore<D>;
}

const inMemory = <D>(projection: DocumentProjection<D>): RegisteredProjection<D> => ({
  projection,
  createStore: () => createMemoryDocumentStore(projection),
});

export const TICKET_PROJECTIONS = {
  tickets: inMemory(ticketProjection),
  messages: inMemory(messageProjection),
  contacts: inMemory(contactProjection),
} as const;

export const PROJECTIONS: readonly RegisteredProjection<unknown>[] = Object.values(TICKET_PROJECTIONS) as RegisteredProjection<unknown>[];
