import { expect } from 'chai';
import type { SqliteEventLog } from '../../src/log/sqlite.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { eventsOf, expectBusinessError, expectCatalogueData, expectSchemaError, expectShortError, openTicket, ticketId, uniqueEmail } from '../support/tickets-fixtures.js';

describe('tickets API (e2e)', () => {
  let test: TestService;
  let ws: TestWorkspace;
  let other: TestWorkspace;

  before(async () => {
    test = await startTestService();
    ws = await test.createWorkspace('team');
    other = await test.createWorkspace('team');
  });
  after(() => test.close());

  describe('POST /tickets', () => {
    it('opens a ticket (201) readable at once, with contact (internal), ticket.created and message.created', async () => {
      const email = uniqueEmail();
      const reply = await openTicket(ws, { subject: 'Printer', priority: 'high', contact: { email, full_name: 'Ann' }, message: 'It jams' });
      expect(reply.status).to.equal(201);
      expect(reply.body).to.include({ subject: 'Printer', priority: 'high', status: 'new', last_message_preview: 'It jams' });
      const read = await ws.api('GET', `/api/v1/tickets/${reply.body.id}`);
      expect(read.status).to.equal(200);
      expect(read.body).to.deep.equal(reply.body);

      const events = await eventsOf(test, ws.workspaceId);
      const mine = events.filter((e) => e.data['ticket_id'] === reply.body.id || e.data['contact_id'] === reply.body.contact_id);
      expect(mine.map((e) => e.type)).to.include.members(['contact.registered', 'ticket.created', 'message.created']);
      expect(mine.map((e) => e.type)).to.not.include.members(['contact.created', 'contact.identified']);
      expect(mine.find((e) => e.type === 'ticket.created')?.data).to.deep.equal({
        ticket_id: reply.body.id,
        status: 'new',
        priority: 'high',
        contact_id: reply.body.contact_id,
        subject: 'Printer',
      });
      expect(mine.find((e) => e.type === 'message.created')?.data).to.include({ sender_type: 'contact', sender_id: reply.body.contact_id, sender_name: 'Ann', content: 'It jams' });
      expectCatalogueData(events);
    });

    it('reuses the contact for the same email, in any case', async () => {
      const email = uniqueEmail();
      const a = await openTicket(ws, { contact: { email } });
      const b = await openTicket(ws, { contact: { email: email.toUpperCase() } });
      expect(b.body.contact_id).to.equal(a.body.contact_id);
    });

    it('opens a ticket for a known contact in one commit: the ticket and its count against the month together', async () => {
      const email = uniqueEmail();
      await openTicket(ws, { contact: { email } });
      const log = test.service.core.log as SqliteEventLog;
      const before = log.stats().transactions;
      const reply = await openTicket(ws, { contact: { email }, message: 'Again' });
      expect(reply.status).to.equal(201);
      expect(log.stats().transactions - before).to.equal(1);
      const counted = (await eventsOf(test, ws.workspaceId)).filter((e) => e.type === 'ticket.quota_used' && e.data['ticket_id'] === reply.body.id);
      expect(counted).to.have.length(1);
    });

    it('opens a ticket for a new contact in two commits: the contact with its identifiers, then the ticket with its count', async () => {
      const log = test.service.core.log as SqliteEventLog;
      const before = log.stats().transactions;
      const reply = await openTicket(ws, { contact: { email: uniqueEmail(), telegram_id: `tg-${uniqueEmail()}` } });
      expect(reply.status).to.equal(201);
      expect(log.stats().transactions - before).to.equal(2);
    });

    it('many tickets opened at once for one new contact share one contact', async () => {
      const email = uniqueEmail();
      const replies = await Promise.all(Array.from({ length: 24 }, (_, i) => openTicket(ws, { contact: i % 2 === 0 ? { email } : { email, telegram_id: `tg-${email}` } })));
      expect(replies.map((r) => r.status)).to.deep.equal(Array(24).fill(201));
      expect(new Set(replies.map((r) => r.body.contact_id)).size).to.equal(1);
      const registered = (await eventsOf(test, ws.workspaceId, ['contact.registered'])).filter((e) => e.data['email'] === email);
      expect(registered.map((e) => e.data['contact_id'])).to.deep.equal([replies[0]?.body.contact_id]);
    });

    it('400 short form without telegram_id and email', async () => {
      expectShortError(await ws.api('POST', '/api/v1/tickets', { contact: { full_name: 'Nobody' } }), 400);
      expectShortError(await ws.api('POST', '/api/v1/tickets', { contact: {} }), 400);
    });

    it('422 schema for unknown priority, wrong types and unknown fields', async () => {
      expectSchemaError(await openTicket(ws, { priority: 'urgent' }), 'priority');
      expectSchemaError(await openTicket(ws, { subject: 5 }), 'subject');
      expectSchemaError(await openTicket(ws, { colour: 'red' }), 'colour');
    });

    it('422 MESSAGE_EMPTY for a blank first message, and VALIDATION_ERROR for unknown media', async () => {
      expectBusinessError(await openTicket(ws, { message: '   ' }), 422, 'MESSAGE_EMPTY');
      const reply = await openTicket(ws, { message: { content: 'see file', media_ids: ['nope'] } });
      expectBusinessError(reply, 422, 'VALIDATION_ERROR');
      expect(reply.body.detail).to.include({ field: 'media_ids', media_id: 'nope' });
    });

    it('403 CONTACT_BLOCKED for a blocked contact', async () => {
      const email = uniqueEmail();
      const first = await openTicket(ws, { contact: { email } });
      const blocked = await test.admin('POST', `/internal/v1/workspaces/${ws.workspaceId}/contacts/${first.body.contact_id}/block`);
      expect(blocked.status).to.equal(200);
      expect(blocked.body.is_blocked).to.equal(true);
      expectBusinessError(await openTicket(ws, { contact: { email } }), 403, 'CONTACT_BLOCKED');
      await test.admin('POST', `/internal/v1/workspaces/${ws.workspaceId}/contacts/${first.body.contact_id}/unblock`);
      expect((await openTicket(ws, { contact: { email } })).status).to.equal(201);
    });
  });

  describe('GET /tickets', () => {
    it('pages, filters by status and contact, and counts the total', async () => {
      const fresh = await test.createWorkspace('team');
      const email = uniqueEmail();
      const ids = [];
      for (let i = 0; i < 5; i++) ids.push(await ticketId(fresh, { contact: { email: i < 3 ? email : uniqueEmail() } }));
      await fresh.api('POST', `/api/v1/tickets/${ids[0]}/close`);

      const page = await fresh.api('GET', '/api/v1/tickets?page=2&page_size=2');
      expect(page.status).to.equal(200);
      expect(page.body).to.include({ page: 2, page_size: 2, total: 5 });
      expect(page.body.items.map((t: { id: string }) => t.id)).to.deep.equal([ids[2], ids[1]]);

      const closed = await fresh.api('GET', '/api/v1/tickets?status=closed');
      expect(closed.body.items.map((t: { id: string }) => t.id)).to.deep.equal([ids[0]]);
      expect(closed.body).to.include({ page: 1, page_size: 20, total: 1 });

      const contactId = (await fresh.api('GET', `/api/v1/tickets/${ids[0]}`)).body.contact_id;
      const byContact = await fresh.api('GET', `/api/v1/tickets?contact_id=${contactId}`);
      expect(byContact.body.total).to.equal(3);
    });

    it('422 schema for page_size above 100, page 0 and unknown status', async () => {
      expectSchemaError(await ws.api('GET', '/api/v1/tickets?page_size=101'), 'page_size');
      expectSchemaError(await ws.api('GET', '/api/v1/tickets?page=0'), 'page');
      expectSchemaError(await ws.api('GET', '/api/v1/tickets?status=lost'), 'status');
    });

    it("never lists another workspace's tickets", async () => {
      const id = await ticketId(ws);
      const list = await other.api('GET', '/api/v1/tickets?page_size=100');
      expect(list.body.items.map((t: { id: string }) => t.id)).to.not.include(id);
    });
  });

  describe('one ticket', () => {
    it('404 TICKET_NOT_FOUND with {ticket_id}, also for another workspace', async () => {
      const missing = await ws.api('GET', '/api/v1/tickets/nope');
      expectBusinessError(missing, 404, 'TICKET_NOT_FOUND');
      expect(missing.body.detail).to.deep.equal({ ticket_id: 'nope' });
      const id = await ticketId(ws);
      for (const [method, path, body] of [
        ['GET', `/api/v1/tickets/${id}`, undefined],
        ['PATCH', `/api/v1/tickets/${id}`, { subject: 'x' }],
        ['POST', `/api/v1/tickets/${id}/close`, undefined],
        ['POST', `/api/v1/tickets/${id}/reopen`, undefined],
        ['POST', `/api/v1/tickets/${id}/rate`, { rating: 3 }],
        ['POST', `/api/v1/tickets/${id}/messages`, { content: 'x' }],
        ['GET', `/api/v1/tickets/${id}/messages`, undefined],
      ] as const) {
        expectBusinessError(await other.api(method, path, body), 404, 'TICKET_NOT_FOUND');
      }
      const events = await eventsOf(test, other.workspaceId);
      expect(events.filter((e) => e.data['ticket_id'] === id)).to.deep.equal([]);
    });

    it('PATCH changes fields (200) and emits ticket.updated with ids only', async () => {
      const id = await ticketId(ws);
      const reply = await ws.api('PATCH', `/api/v1/tickets/${id}`, { subject: 'Changed', priority: 'high', status: 'pending' });
      expect(reply.status).to.equal(200);
      expect(reply.body).to.include({ subject: 'Changed', priority: 'high', status: 'pending' });
      const updated = (await eventsOf(test, ws.workspaceId, ['ticket.updated'])).filter((e) => e.data['ticket_id'] === id);
      expect(updated.map((e) => e.data)).to.deep.equal([{ ticket_id: id, workspace_id: ws.workspaceId }]);
    });

    it('PATCH: 422 TICKET_INVALID_STATUS_TRANSITION for a disallowed status, schema 422 for unknown values', async () => {
      const id = await ticketId(ws);
      expect((await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'resolved' })).status).to.equal(200);
      const refused = await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'pending' });
      expectBusinessError(refused, 422, 'TICKET_INVALID_STATUS_TRANSITION');
      expect(refused.body.detail).to.include({ from: 'resolved', to: 'pending' });
      expectBusinessError(await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'new' }), 422, 'TICKET_INVALID_STATUS_TRANSITION');
      expectSchemaError(await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'lost' }), 'status');
      expectSchemaError(await ws.api('PATCH', `/api/v1/tickets/${id}`, { priority: 'urgent' }), 'priority');
      expectSchemaError(await ws.api('PATCH', `/api/v1/tickets/${id}`, {}));
    });

    it('close (200, ticket.closed), close again 409 TICKET_ALREADY_CLOSED without change, reopen (ticket.reopened)', async () => {
      const id = await ticketId(ws);
      const closed = await ws.api('POST', `/api/v1/tickets/${id}/close`);
      expect(closed.status).to.equal(200);
      expect(closed.body.status).to.equal('closed');
      const before = await eventsOf(test, ws.workspaceId);
      const again = await ws.api('POST', `/api/v1/tickets/${id}/close`);
      expectBusinessError(again, 409, 'TICKET_ALREADY_CLOSED');
      expect(await eventsOf(test, ws.workspaceId)).to.have.length(before.length);
      expectBusinessError(await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'open' }), 422, 'TICKET_INVALID_STATUS_TRANSITION');

      const reopened = await ws.api('POST', `/api/v1/tickets/${id}/reopen`);
      expect(reopened.status).to.equal(200);
      expect(reopened.body).to.include({ status: 'open', closed_at: null });
      expectBusinessError(await ws.api('POST', `/api/v1/tickets/${id}/reopen`), 422, 'TICKET_INVALID_STATUS_TRANSITION');

      const events = (await eventsOf(test, ws.workspaceId)).filter((e) => e.data['ticket_id'] === id);
      const close = events.find((e) => e.type === 'ticket.closed');
      expect(close?.data).to.have.keys('ticket_id', 'closed_at', 'resolution_secs');
      expect(events.find((e) => e.type === 'ticket.reopened')?.data).to.deep.equal({ ticket_id: id, status: 'open' });
      expectCatalogueData(events);
    });

    it('rate: 200 with ticket.rated (through the API always with comment, null when none is given); rating outside 1..5 is a schema 422', async () => {
      const id = await ticketId(ws);
      expect((await ws.api('POST', `/api/v1/tickets/${id}/rate`, { rating: 4 })).body.rating).to.equal(4);
      const rated = await ws.api('POST', `/api/v1/tickets/${id}/rate`, { rating: 5, comment: 'Quick' });
      expect(rated.status).to.equal(200);
      expect(rated.body).to.include({ rating: 5, rating_comment: 'Quick' });
      expectSchemaError(await ws.api('POST', `/api/v1/tickets/${id}/rate`, { rating: 6 }), 'rating');
      expectSchemaError(await ws.api('POST', `/api/v1/tickets/${id}/rate`, { rating: 0 }), 'rating');
      const events = (await eventsOf(test, ws.workspaceId, ['ticket.rated'])).filter((e) => e.data['ticket_id'] === id);
      expect(events.map((e) => e.data)).to.deep.equal([
        { ticket_id: id, rating: 4, comment: null },
        { ticket_id: id, rating: 5, comment: 'Quick' },
      ]);
    });
  });

  describe('ticket messages', () => {
    it('POST (201) as the bot with the workspace id as sender; GET lists them in order, paged', async () => {
      const id = await ticketId(ws, { message: 'first' });
      const posted = await ws.api('POST', `/api/v1/tickets/${id}/messages`, { content: 'second' });
      expect(posted.status).to.equal(201);
      expect(posted.body).to.include({ ticket_id: id, sender_type: 'bot', sender_id: ws.workspaceId, content: 'second', is_internal: false });
      const list = await ws.api('GET', `/api/v1/tickets/${id}/messages?page_size=1&page=2`);
      expect(list.body).to.include({ page: 2, page_size: 1, total: 2 });
      expect(list.body.items[0].id).to.equal(posted.body.id);
      expect((await ws.api('GET', `/api/v1/tickets/${id}`)).body.last_message_preview).to.equal('second');
      const created = (await eventsOf(test, ws.workspaceId, ['message.created'])).find((e) => e.data['message_id'] === posted.body.id);
      expect(created?.data).to.include({ id: posted.body.id, sender_type: 'bot', sender_id: ws.workspaceId });
      expectCatalogueData(created === undefined ? [] : [created]);
    });

    it('422 MESSAGE_EMPTY for blank content without media; VALIDATION_ERROR for a file of another workspace', async () => {
      const id = await ticketId(ws);
      expectBusinessError(await ws.api('POST', `/api/v1/tickets/${id}/messages`, { content: '  ' }), 422, 'MESSAGE_EMPTY');
      expectBusinessError(await ws.api('POST', `/api/v1/tickets/${id}/messages`, {}), 422, 'MESSAGE_EMPTY');
      const foreign = test.service.core.newId();
      await test.service.core.log.append(
        `media-${foreign}`,
        [{ id: test.service.core.newId(), type: 'media.uploaded', workspaceId: other.workspaceId, data: { media_id: foreign, file_name: 'a.txt', content_type: 'text/plain', size: 1, url: `/api/media/${foreign}` } }],
        'no_stream',
      );
      const reply = await ws.api('POST', `/api/v1/tickets/${id}/messages`, { content: 'x', media_ids: [foreign] });
      expectBusinessError(reply, 422, 'VALIDATION_ERROR');
      const withOwn = await other.api('POST', `/api/v1/tickets/${await ticketId(other)}/messages`, { media_ids: [foreign] });
      expect(withOwn.status).to.equal(201);
      expect(withOwn.body.media).to.deep.equal([{ id: foreign, url: `/api/media/${foreign}`, file_name: 'a.txt', content_type: 'text/plain', size: 1 }]);
    });
  });

  describe('POST /messages (inbound from a contact)', () => {
    it("opens a ticket for a new contact, then adds to the contact's open ticket (200, sender_type contact)", async () => {
      const email = uniqueEmail();
      const first = await ws.api('POST', '/api/v1/messages', { content: 'Hello', contact: { email, full_name: 'Bo' } });
      expect(first.status).to.equal(200);
      expect(first.body).to.include({ sender_type: 'contact', sender_name: 'Bo', content: 'Hello' });
      const second = await ws.api('POST', '/api/v1/messages', { content: 'Anyone?', contact: { email } });
      expect(second.body.ticket_id).to.equal(first.body.ticket_id);
      const byTicket = await ws.api('POST', '/api/v1/messages', { content: 'Third', ticket_id: first.body.ticket_id });
      expect(byTicket.status).to.equal(200);
      expect(byTicket.body.sender_id).to.equal(first.body.sender_id);

      await ws.api('POST', `/api/v1/tickets/${first.body.ticket_id}/close`);
      const afterClose = await ws.api('POST', '/api/v1/messages', { content: 'New issue', contact: { email } });
      expect(afterClose.body.ticket_id).to.not.equal(first.body.ticket_id);
    });

    it('a contact reply brings a pending ticket back to open', async () => {
      const id = await ticketId(ws);
      await ws.api('PATCH', `/api/v1/tickets/${id}`, { status: 'pending' });
      await ws.api('POST', '/api/v1/messages', { content: 'Still broken', ticket_id: id });
      expect((await ws.api('GET', `/api/v1/tickets/${id}`)).body.status).to.equal('open');
    });

    it('400 without ticket_id or contact identifiers; 422 MESSAGE_EMPTY; text only; 404 for an unknown ticket', async () => {
      expectShortError(await ws.api('POST', '/api/v1/messages', { content: 'x' }), 400);
      expectShortError(await ws.api('POST', '/api/v1/messages', { content: 'x', contact: { full_name: 'A' } }), 400);
      expectBusinessError(await ws.api('POST', '/api/v1/messages', { content: ' ', contact: { email: uniqueEmail() } }), 422, 'MESSAGE_EMPTY');
      expectSchemaError(await ws.api('POST', '/api/v1/messages', { content: 'x', media_ids: [], contact: { email: uniqueEmail() } }), 'media_ids');
      expectBusinessError(await ws.api('POST', '/api/v1/messages', { content: 'x', ticket_id: 'nope' }), 404, 'TICKET_NOT_FOUND');
    });
  });
});

describe('monthly ticket limit (e2e)', () => {
  let test: TestService;
  before(async () => {
    test = await startTestService({ PLANS: 'free:3:false,team:5000:true' });
  });
  after(() => test.close());

  it('403 TICKET_LIMIT_REACHED at the plan limit, exactly, under 64 concurrent creations (each for a new contact)', async () => {
    const ws = await test.createWorkspace('free');
    const replies = await Promise.all(Array.from({ length: 64 }, () => openTicket(ws)));
    expect(replies.filter((r) => r.status === 201)).to.have.length(3);
    // A refused ticket is neither written nor counted.
    const events = await test.service.core.log.readAll({ after: 0, workspaceId: ws.workspaceId, types: ['ticket.created', 'ticket.quota_used'] });
    expect(events.map((e) => e.type).sort()).to.deep.equal([...Array(3).fill('ticket.created'), ...Array(3).fill('ticket.quota_used')]);
    for (const r of replies.filter((reply) => reply.status !== 201)) expectBusinessError(r, 403, 'TICKET_LIMIT_REACHED');
    expect((await ws.api('GET', '/api/v1/tickets')).body.total).to.equal(3);
    const inbound = await ws.api('POST', '/api/v1/messages', { content: 'hi', contact: { email: uniqueEmail() } });
    expectBusinessError(inbound, 403, 'TICKET_LIMIT_REACHED');
    const team = await test.createWorkspace('team');
    expect((await openTicket(team)).status).to.equal(201);
  });
});
