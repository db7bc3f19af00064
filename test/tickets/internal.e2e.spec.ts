import { expect } from 'chai';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { eventsOf, expectBusinessError, expectCatalogueData, expectSchemaError, ticketId, uniqueEmail } from '../support/tickets-fixtures.js';

describe('internal ticket and contact commands (e2e)', () => {
  let test: TestService;
  let ws: TestWorkspace;
  let base: string;

  before(async () => {
    test = await startTestService();
    ws = await test.createWorkspace();
    base = `/internal/v1/workspaces/${ws.workspaceId}`;
  });
  after(() => test.close());

  const typesFor = async (id: string) => (await eventsOf(test, ws.workspaceId)).filter((e) => e.data['ticket_id'] === id).map((e) => e.type);

  it('assign, transfer and force take emit their catalogue events', async () => {
    const id = await ticketId(ws);
    const assigned = await test.admin('POST', `${base}/tickets/${id}/assign`, { operator_id: 'op1', operator_name: 'Ann' });
    expect(assigned.status).to.equal(200);
    expect(assigned.body).to.include({ operator_id: 'op1', status: 'in_progress' });
    const taken = await test.admin('POST', `${base}/tickets/${id}/force-take`, { operator_id: 'op2' });
    expect(taken.body.operator_id).to.equal('op2');
    expectBusinessError(await test.admin('POST', `${base}/tickets/${id}/force-take`, { operator_id: 'op2' }), 422, 'VALIDATION_ERROR');
    const moved = await test.admin('POST', `${base}/tickets/${id}/transfer`, { department_id: 'd1', department_name: 'Billing', operator_id: 'op3', operator_name: 'Cy' });
    expect(moved.body).to.include({ department_id: 'd1', operator_id: 'op3' });
    expect(await typesFor(id)).to.include.members(['ticket.assigned', 'ticket.updated', 'ticket.force_taken', 'ticket.transferred']);
    const events = await eventsOf(test, ws.workspaceId);
    expect(events.find((e) => e.type === 'ticket.force_taken')?.data).to.deep.equal({ ticket_id: id, operator_id: 'op2', previous_operator_id: 'op1' });
    expectCatalogueData(events);
  });

  it('operator messages and internal notes, edits (not of system messages) and reactions', async () => {
    const id = await ticketId(ws);
    const note = await test.admin('POST', `${base}/tickets/${id}/messages`, { sender: 'operator', operator_id: 'op1', operator_name: 'Ann', content: 'note', is_internal: true });
    expect(note.status).to.equal(201);
    expect(note.body).to.include({ sender_type: 'operator', sender_id: 'op1', is_internal: true });
    const edited = await test.admin('PATCH', `${base}/tickets/${id}/messages/${note.body.id}`, { content: 'better note' });
    expect(edited.body).to.include({ content: 'better note' });
    expect(edited.body.edited_at).to.be.a('string');

    const system = await test.admin('POST', `${base}/tickets/${id}/messages`, { sender: 'system', content: 'Ticket moved' });
    expectBusinessError(await test.admin('PATCH', `${base}/tickets/${id}/messages/${system.body.id}`, { content: 'x' }), 422, 'VALIDATION_ERROR');
    expectBusinessError(await test.admin('PATCH', `${base}/tickets/${id}/messages/nope`, { content: 'x' }), 404, 'MESSAGE_NOT_FOUND');

    const reacted = await test.admin('POST', `${base}/tickets/${id}/messages/${note.body.id}/reactions`, { reactor_kind: 'operator', reactor_id: 'op2', emoji: '👍' });
    expect(reacted.body.reactions).to.deep.equal([{ reactor_kind: 'operator', reactor_id: 'op2', emoji: '👍' }]);
    const removed = await test.admin('DELETE', `${base}/tickets/${id}/messages/${note.body.id}/reactions/op2`);
    expect(removed.body.reactions).to.deep.equal([]);

    const events = await eventsOf(test, ws.workspaceId);
    expect(events.find((e) => e.type === 'message.edited')?.data).to.include({ message_id: note.body.id, ticket_id: id, content: 'better note', is_internal: true });
    expect(events.find((e) => e.type === 'message.reaction.added')?.data).to.deep.equal({ message_id: note.body.id, reactor_kind: 'operator', reactor_id: 'op2', emoji: '👍' });
    // The catalogue's message.reaction.removed is a widget visitor's: an operator's removal is not announced.
    expect(events.filter((e) => e.type === 'message.reaction.removed')).to.deep.equal([]);
    const listed = (await ws.api('GET', `/api/v1/tickets/${id}/messages`)).body.items as { id: string; reactions: unknown[] }[];
    expect(listed.find((m) => m.id === note.body.id)?.reactions).to.deep.equal([]);
    expectCatalogueData(events);
    // An internal note is not the ticket's last message preview.
    expect((await ws.api('GET', `/api/v1/tickets/${id}`)).body.last_message_preview).to.equal('Ticket moved');
  });

  it('widget identify: contact.created the first time, contact.identified on every call', async () => {
    const email = uniqueEmail();
    const first = await test.admin('POST', `${base}/contacts/identify`, { email, internal_id: 'ext-1' });
    expect(first.status).to.equal(200);
    await test.admin('POST', `${base}/contacts/identify`, { email, full_name: 'Dee' });
    const events = (await eventsOf(test, ws.workspaceId, ['contact.created', 'contact.identified'])).filter((e) => e.data['id'] === first.body.id);
    expect(events.map((e) => e.type)).to.deep.equal(['contact.created', 'contact.identified', 'contact.identified']);
    expect(events[2]?.data).to.deep.equal({ id: first.body.id, internal_id: 'ext-1', email, full_name: 'Dee', phone: null, telegram_id: null });
    expectCatalogueData(events);
  });

  it('widget settings: visitor notifications are off until PUT /widget turns them on', async () => {
    const other = await test.createWorkspace();
    const path = `/internal/v1/workspaces/${other.workspaceId}/widget`;
    expect((await test.admin('GET', path)).body).to.deep.equal({ workspace_id: other.workspaceId, visitor_notifications: false });
    const on = await test.admin('PUT', path, { visitor_notifications: true });
    expect(on.status).to.equal(200);
    expect(on.body).to.deep.equal({ workspace_id: other.workspaceId, visitor_notifications: true });
    expect((await test.admin('PUT', path, { visitor_notifications: true })).body.visitor_notifications).to.equal(true);
    expect((await test.admin('GET', path)).body.visitor_notifications).to.equal(true);
    expect((await test.service.core.log.readStream(`widget-${other.workspaceId}`)).map((e) => e.data)).to.deep.equal([{ visitor_notifications: true }]);
    expect((await test.admin('PUT', path, { visitor_notifications: false })).body.visitor_notifications).to.equal(false);
    expectSchemaError(await test.admin('PUT', path, { visitor_notifications: 'yes' }), 'visitor_notifications');
    expectSchemaError(await test.admin('PUT', path, {}), 'visitor_notifications');
    expectSchemaError(await test.admin('PUT', path, { visitor_notifications: true, colour: 'red' }));
    expect((await test.admin('PUT', `/internal/v1/workspaces/${'0'.repeat(32)}/widget`, { visitor_notifications: true })).status).to.equal(404);
  });

  describe('visitor.reply_waiting', () => {
    let visitorWs: TestWorkspace;
    let vbase: string;

    before(async () => {
      visitorWs = await test.createWorkspace();
      vbase = `/internal/v1/workspaces/${visitorWs.workspaceId}`;
    });

    /** A ticket of a widget visitor (identified by the widget first) with an operator's reply, or of an email contact. */
    const replied = async (widget: boolean, email = uniqueEmail()) => {
      if (widget) expect((await test.admin('POST', `${vbase}/contacts/identify`, { email })).status).to.equal(200);
      const id = await ticketId(visitorWs, { contact: { email }, message: 'hi' });
      const reply = await test.admin('POST', `${vbase}/tickets/${id}/messages`, { sender: 'operator', operator_id: 'op1', operator_name: 'Ann', content: 'An answer for you' });
      return { id, body: { message_id: String(reply.body.id), operator_name: 'Ann' } };
    };
    const waiting = (id: string, body: object) => test.admin('POST', `${vbase}/tickets/${id}/reply-waiting`, body);
    const sentFor = async (id: string) => (await eventsOf(test, visitorWs.workspaceId, ['visitor.reply_waiting'])).filter((e) => e.data['ticket_id'] === id);
    const notifications = (on: boolean) => test.admin('PUT', `${vbase}/widget`, { visitor_notifications: on });

    it('is not sent while visitor notifications are off', async () => {
      await notifications(false);
      const { id, body } = await replied(true);
      expect((await waiting(id, body)).body).to.deep.equal({ emitted: false, reason: 'visitor_notifications_disabled' });
      expect(await sentFor(id)).to.deep.equal([]);
    });

    it('is sent to a widget visitor once visitor notifications are on, at most once per 5 minutes', async () => {
      await notifications(true);
      const email = uniqueEmail();
      const { id, body } = await replied(true, email);
      expect((await waiting(id, body)).body).to.deep.equal({ emitted: true });
      expect((await waiting(id, body)).body).to.deep.equal({ emitted: false, reason: 'sent_within_5_minutes' });
      // Per visitor, not per ticket: the same visitor's next ticket within the 5 minutes gets nothing either.
      const next = await replied(true, email);
      expect((await waiting(next.id, next.body)).body).to.deep.equal({ emitted: false, reason: 'sent_within_5_minutes' });
      expect(await sentFor(next.id)).to.deep.equal([]);
      const events = await sentFor(id);
      expect(events).to.have.length(1);
      expect(events[0]?.data).to.include({ message_id: body.message_id, preview: 'An answer for you', operator_name: 'Ann' });
      expectCatalogueData(events);
    });

    it('is not sent to a contact of another channel (email, Telegram, the API), even with notifications on', async () => {
      await notifications(true);
      const { id, body } = await replied(false);
      expect((await waiting(id, body)).body).to.deep.equal({ emitted: false, reason: 'not_a_widget_visitor' });
      expect(await sentFor(id)).to.deep.equal([]);
    });
  });

  it('needs the admin token and an existing workspace', async () => {
    expect((await call(`${test.url}${base}/contacts/identify`, 'POST', ws.apiKey, { email: uniqueEmail() })).status).to.equal(401);
    expect((await test.admin('POST', '/internal/v1/workspaces/nope/contacts/identify', { email: uniqueEmail() })).status).to.equal(404);
  });
});
