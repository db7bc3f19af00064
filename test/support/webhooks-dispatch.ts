// Helpers for the delivery engine's end-to-end tests: subscriptions through the API, public events
// appended straight to the service's log, and waiting for what receivers get.
import { expect } from 'chai';
import type { PublicEvent } from '../../src/domain/catalogue.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { randomId } from '../../src/shared/ids.js';
import type { ReceivedRequest, Receiver } from './receiver.js';
import { ADMIN_TOKEN, type TestService, type TestWorkspace } from './server.js';
import { appendEvents, ticketUpdated } from './updates-events.js';

/** The whole retry schedule in a tenth of a second. */
export const FAST_RETRIES = { WEBHOOK_RETRY_DELAYS: '20ms,20ms,20ms,20ms,20ms' };

export const subscribe = async (ws: TestWorkspace, url: string, events?: readonly string[]): Promise<{ id: string; secret: string }> => {
  const created = await ws.api('POST', '/api/v1/webhooks', { url, description: 'delivery test', ...(events === undefined ? {} : { events }) });
  expect(created.status, JSON.stringify(created.body)).to.equal(201);
  return { id: String(created.body.id), secret: String(created.body.secret) };
};

/** Appends one public event of the workspace (ticket.updated unless told) and returns its record. */
export const emit = async (test: TestService, workspaceId: string, event: PublicEvent = ticketUpdated(randomId())): Promise<RecordedEvent> => {
  const [record] = await appendEvents(test.service.core.log, workspaceId, [event]);
  if (record === undefined) throw new Error('nothing appended');
  return record;
};

/** Polls `probe` until it returns a value other than undefined/false. */
export const eventually = async <T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

export const settle = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const header = (request: ReceivedRequest, name: string): string => String(request.headers[name.toLowerCase()] ?? '');

/** The envelope's event id of a received delivery. */
export const eventIdOf = (request: ReceivedRequest): string => String((JSON.parse(request.body.toString('utf8')) as { id: string }).id);

export const requestsFor = (requests: readonly ReceivedRequest[], eventId: string): ReceivedRequest[] => requests.filter((r) => eventIdOf(r) === eventId);

/** The service and receiver a test of the calling describe starts: closed after each test. */
export const closedAfterEach = (): { test?: TestService; receiver?: Receiver } => {
  const started: { test?: TestService; receiver?: Receiver } = {};
  afterEach(async () => {
    await started.receiver?.close();
    await started.test?.close();
    delete started.test;
    delete started.receiver;
  });
  return started;
};

/** The lines of the service's /admin/v1/metrics that match. */
export const metricLines = async (test: TestService, matching: RegExp): Promise<string[]> => {
  const reply = await fetch(`${test.url}/admin/v1/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  expect(reply.status).to.equal(200);
  return (await reply.text()).split('\n').filter((line) => matching.test(line));
};
