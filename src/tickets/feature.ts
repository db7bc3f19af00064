// The tickets feature: tickets, messages and contacts — aggregates, read models, public routes
// under /api/v1 and the internal commands under /internal/v1.
import { createCommandHandler, createStateCache, type CommandHandler } from '../app/command-handler.js';
import type { Core, Feature } from '../app/core.js';
import { mediaLinksOf } from '../media/signed-links.js';
import { createContactCommands } from './contacts.js';
import { createTicketQuota } from './quota.js';
import { createTicketReadModels } from './read-models.js';
import { contactRoutes } from './routes-contacts.js';
import { internalRoutes } from './routes-internal.js';
import { ticketOperations } from './operations.js';
import { messageRoutes } from './routes-messages.js';
import { ticketRoutes } from './routes-tickets.js';
import { createTicketCommands } from './ticket-commands.js';

/** Ticket and contact streams a process keeps folded (a few KB each); the rest are read again. */
const CACHED_STREAMS = 10_000;

export const createTicketsFeature = (core: Core): Feature => {
  const readModels = createTicketReadModels(core);
  // Ticket and contact streams are never deleted, so their commands can start from cached states.
  const handler = createCommandHandler(core.log, core.newId, createStateCache(CACHED_STREAMS));
  // A command whose answer needs the read models is refused before it writes when they are out of reach.
  const handle: CommandHandler = (aggregate, stream, workspaceId, command, scope, appender) => {
    readModels.assertAvailable();
    return handler(aggregate, stream, workspaceId, command, scope, appender);
  };
  const cached: Core = { ...core, handle };
  const contacts = createContactCommands(cached);
  const commands = createTicketCommands(cached, contacts, createTicketQuota(core.log, core.clock, core.newId), readModels, mediaLinksOf(core.config));
  const deps = { core, commands, contacts, readModels };
  const api = [ticketRoutes(deps), messageRoutes(deps), contactRoutes(deps)];
  return {
    name: 'tickets',
    routes: {
      api: (router) => api.forEach((register) => register(router)),
      internal: internalRoutes(deps),
      operations: ticketOperations,
    },
    start: () => readModels.start(),
    stop: () => readModels.stop(),
  };
};
