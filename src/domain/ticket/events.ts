// Builds decided events. Public ones are typed by their catalogue codec, so the compiler checks
// every field the contract lists; internal ones carry what read models and aggregates need.
import type { Decided } from '../aggregate.js';
import type { JsonObject } from '../../log/event-log.js';
import type { EventDataOf } from '../catalogue.js';
import type { PublicEventType } from '../event-types.js';

export const publicEvent = <T extends PublicEventType>(type: T, data: EventDataOf<T>): Decided => ({ type, data: data as JsonObject });

export const internalEvent = (type: string, data: JsonObject): Decided => ({ type, data });

/** ticket.updated: only ids (after PATCH) plus what the source adds; REST has the current state. */
export const ticketUpdated = (ticketId: string, workspaceId: string, extra: JsonObject = {}): Decided => {
  const data = { ticket_id: ticketId, workspace_id: workspaceId, ...extra };
  return publicEvent('ticket.updated', data);
};
