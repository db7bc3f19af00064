// Public and internal events appended straight to the log, with data shaped by the catalogue, for
// the /updates and export tests and the updates benchmark.
import type { EventLog, NewEvent, RecordedEvent } from '../../src/log/event-log.js';
import type { PublicEvent } from '../../src/domain/catalogue.js';
import { randomId } from '../../src/shared/ids.js';

export const ticketUpdated = (ticketId: string): PublicEvent => ({ type: 'ticket.updated', data: { ticket_id: ticketId } });

export const operatorStatus = (userId: string): PublicEvent => ({
  type: 'operator.status.changed',
  data: { user_id: userId, status: 'online', status_text: null, status_emoji: null },
});

const toNew = (workspaceId: string, event: { type: string; data: object }): NewEvent => ({
  id: randomId(),
  type: event.type,
  workspaceId,
  data: event.data as NewEvent['data'],
});

/** Appends the events to one stream of the workspace in one atomic call. */
export const appendEvents = async (
  log: EventLog,
  workspaceId: string,
  events: readonly { type: string; data: object }[],
  stream = `test-${workspaceId}`,
): Promise<RecordedEvent[]> => [...(await log.append(stream, events.map((e) => toNew(workspaceId, e)), 'any')).records];

/** An event type outside the catalogue: it lives in the log but never in the feed. */
export const internalEvent = { type: 'subscription.created', data: { url: 'https://example.test/hook' } };
