// The parts of a Core that come from the log and the clock alone, the same in every process or thread
// that builds one (the composition root, the embedded role's dispatcher thread).
import type { EventLog } from '../log/event-log.js';
import type { MicrosClock } from '../log/clock.js';
import { isoMicros } from '../domain/envelope.js';
import { randomId } from '../shared/ids.js';
import { createCommandHandler } from './command-handler.js';
import type { Core } from './core.js';
import { resourceId } from './request-claim.js';
import { createWorkspaceCommands } from './workspaces.js';

export type LogCore = Pick<Core, 'log' | 'clock' | 'newId' | 'resourceId' | 'handle' | 'workspaces'>;

export const logCore = (log: EventLog, clock: MicrosClock): LogCore => {
  const handle = createCommandHandler(log, randomId);
  return {
    log,
    clock,
    newId: randomId,
    resourceId: (kind) => resourceId(kind, randomId),
    handle,
    workspaces: createWorkspaceCommands(handle, randomId, () => isoMicros(clock())),
  };
};
