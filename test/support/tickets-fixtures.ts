// Helpers for the tickets feature's HTTP tests: open a ticket, read a workspace's events from the
// log, and check public event data against the catalogue codecs.
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { EventData } from '../../src/domain/catalogue.js';
import { isPublicEventType } from '../../src/domain/event-types.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { Reply, TestService, TestWorkspace } from './server.js';

export const uniqueEmail = (): string => `c-${randomUUID()}@example.com`;

export const openTicket = async (ws: TestWorkspace, body: Record<string, unknown> = {}): Promise<Reply> => {
  const reply = await ws.api('POST', '/api/v1/tickets', { contact: { email: uniqueEmail() }, subject: 'Help', ...body });
  return reply;
};

/** The id of a newly opened ticket (fails the test when it could not be opened). */
export const ticketId = async (ws: TestWorkspace, body: Record<string, unknown> = {}): Promise<string> => {
  const reply = await openTicket(ws, body);
  expect(reply.status, JSON.stringify(reply.body)).to.equal(201);
  return String(reply.body.id);
};

export const eventsOf = async (test: TestService, workspaceId: string, types?: readonly string[]): Promise<RecordedEvent[]> =>
  test.service.core.log.readAll({ after: 0, workspaceId, ...(types === undefined ? {} : { types }) });

/** Every public event's data matches its catalogue codec. */
export const expectCatalogueData = (records: readonly RecordedEvent[]): void => {
  for (const r of records) {
    if (!isPublicEventType(r.type)) continue;
    expect(EventData[r.type].is(r.data), `${r.type} data ${JSON.stringify(r.data)}`).to.equal(true);
  }
};

export const expectBusinessError = (reply: Reply, status: number, code: string): void => {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
  expect(reply.body).to.have.keys('error_code', 'error_message', 'detail', 'request_id');
  expect(reply.body.error_code).to.equal(code);
  expect(reply.body.request_id).to.equal(reply.headers.get('x-request-id'));
};

export const expectShortError = (reply: Reply, status: number): void => {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
  expect(reply.body).to.have.keys('detail');
  expect(reply.body.detail).to.be.a('string');
};

export const expectSchemaError = (reply: Reply, field?: string): void => {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(422);
  expect(reply.body.detail).to.be.an('array').that.is.not.empty;
  for (const p of reply.body.detail) expect(p).to.have.keys('type', 'loc', 'msg');
  if (field !== undefined) expect(reply.body.detail.map((p: { loc: unknown[] }) => p.loc.at(-1))).to.include(field);
};
