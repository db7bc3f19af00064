// The parts of a Core that come from the log and the clock alone, the same in every process or thread
// that builds one (the composition root, the embedded role's dispatcher thread), and the whole Core of
// one that serves no HTTP (the dispatcher thread, benchmark role processes).
import { memoryDocumentStores } from '../../projections/tickets-store-memory.js';
import { createWorkspaceDirectory } from '../../projections/workspace-directory.js';
import type { Config } from '../config/config.js';
import type { EventLog } from '../log/event-log.js';
import { createMemoryRateLimiter } from '../ratelimit/memory.js';
import { createMemoryNotifier } from '../updates/memory.js';
import type { MicrosClock } from '../log/clock.js';
import { isoMicros } from '../domain/envelope.js';
import { eventId, randomId } from '../shared/ids.js';
import { createCommandHandler } from './command-handler.js';
import type { Core } from './core.js';
import { resourceId } from './request-claim.js';
import { createWorkspaceCommands } from './workspaces.js';

export type LogCore = Pick<Core, 'log' | 'clock' | 'newId' | 'resourceId' | 'handle' | 'workspaces'>;

export const logCore = (log: EventLog, clock: MicrosClock): LogCore => {
  const handle = createCommandHandler(log, eventId);
  return {
    log,
    clock,
    newId: eventId,
    resourceId: (kind, scope) => resourceId(kind, randomId, scope?.claim),
    handle,
    workspaces: createWorkspaceCommands(handle, randomId, () => isoMicros(clock())),
  };
};

/**
 * A Core for work that serves no HTTP: the log's parts, and empty stand-ins for the workspace
 * directory, documents, notifier and rate limits, which such work never uses.
 */
export const backgroundCore = (config: Config, log: EventLog, clock: MicrosClock): Core => ({
  ...logCore(log, clock),
  config,
  directory: createWorkspaceDirectory(),
  directorySettled: async () => undefined,
  documents: memoryDocumentStores,
  notifier: createMemoryNotifier(),
  rateLimiter: createMemoryRateLimiter({ windowMs: config.rateLimit.windowMs }),
});
