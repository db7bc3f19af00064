// Every event of the contract's catalogue (spec "Events"), one `it` each, caused by its real command
// through the HTTP API (the public /api/v1, or the internal routes for what the public API cannot
// cause), and seen where integrators see it: at a real webhook receiver in this process (signature
// checked over the raw bytes) and in /api/v1/updates, the same envelope in both. Each checks:
//   - exactly the `data` fields the contract lists for the event, no other; a conditional field only
//     under its condition, both sides tried where the contract names one;
//   - the `_links` rules: ticket.* and message.* with ticket_id → ticket and messages; contact.* →
//     contact and tickets; every other event {}; and each link answers a GET with the API key;
//   - the enumerations (sender_type, operator status, trigger, reason, ticket status, priority).
// The field lists and enumerations below are copied by hand from the contract, not imported from the
// code: this is the independent check of src/domain/catalogue.ts and of the producers. Every delivery
// and /updates answer is also checked against the server's own API document (its webhooks, and
// /updates' union of the catalogue's envelopes), headers included.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { expect } from 'chai';
import { conformanceOf, type Conformance } from '../support/openapi-conformance.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';

// ---------------------------------------------------------------------------------------------
// The contract, by hand

/** "Catalogue": each event's `data` fields, without the conditional ones (named per event below). */
const FIELDS: Readonly<Record<string, readonly string[]>> = {
  'ticket.created': ['ticket_id', 'status', 'priority', 'contact_id', 'subject'],
  'ticket.updated': ['ticket_id'],
  'ticket.assigned': ['ticket_id', 'operator_id', 'operator_name', 'operator_avatar_url', 'status'],
  'ticket.transferred': ['ticket_id', 'department_id', 'department_name', 'operator_id', 'operator_name'],
  'ticket.force_taken': ['ticket_id', 'operator_id', 'previous_operator_id'],
  'ticket.closed': ['ticket_id', 'closed_at', 'resolution_secs'],
  'ticket.reopened': ['ticket_id', 'status'],
  'ticket.rated': ['ticket_id', 'rating'],
  'message.created': ['id', 'message_id', 'ticket_id', 'sender_type', 'sender_id', 'sender_name', 'content', 'is_internal', 'media', 'created_at'],
  'message.edited': ['id', 'message_id', 'ticket_id', 'content', 'is_internal', 'edited_at'],
  'message.reaction.added': ['message_id', 'reactor_kind', 'reactor_id', 'emoji'],
  'message.reaction.removed': ['message_id', 'reactor_id'],
  'contact.created': ['id', 'internal_id', 'email', 'full_name', 'phone', 'telegram_id'],
  'contact.identified': ['id', 'internal_id', 'email', 'full_name', 'phone', 'telegram_id'],
  'visitor.reply_waiting': [
    'contact_id',
    'external_id',
    'telegram_user_id',
    'ticket_id',
    'ticket_short_id',
    'message_id',
    'operator_name',
    'preview',
    'locale',
    'surface',
    'open_url',
    'replied_at',
  ],
  'operator.status.changed': ['user_id', 'status', 'status_text', 'status_emoji'],
  'billing.payment_received': ['payment_id', 'order_id', 'amount', 'currency', 'method', 'transaction_id', 'new_balance'],
  'billing.payment_failed': ['payment_id', 'order_id', 'amount', 'method', 'reason'],
  'billing.plan_renewed': ['plan', 'amount', 'new_balance', 'expires_at', 'trigger'],
  'billing.plan_changed': ['old_plan', 'new_plan', 'expires_at'],
  'billing.plan_downgraded': ['old_plan', 'new_plan', 'expires_at'],
  'billing.balance_low': ['plan', 'balance', 'price', 'shortfall'],
  'billing.subscription_expired': ['old_plan', 'reason', 'expired_at'],
};
const CATALOGUE = Object.keys(FIELDS);

/** "Enumerations" and "Other records". */
const TICKET_STATUSES = ['new', 'open', 'in_progress', 'pending', 'resolved', 'closed'];
const PRIORITIES = ['normal', 'high'];
const SENDER_TYPES = ['contact', 'operator', 'bot', 'ai'];
const OPERATOR_STATUSES = ['online', 'away', 'dnd', 'custom', 'offline'];
const TRIGGERS = ['auto', 'manual'];
const EXPIRY_REASONS = ['insufficient_balance', 'auto_renew_disabled'];

const ISO_MICROS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;

// ---------------------------------------------------------------------------------------------
// Seeing an event at the receiver and in /updates

interface Envelope {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly workspace_id: string;
  readonly data: Record<string, any>;
  readonly _links: Record<string, string>;
}

/** A workspace subscribed to every event at the file's receiver, and its internal routes. */
interface Subject {
  readonly ws: TestWorkspace;
  readonly id: string;
  readonly secret: string;
  internal(method: string, path: string, body?: unknown): Promise<Reply>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('the event catalogue, event by event, at a webhook receiver and in /updates (e2e)', function () {
  this.timeout(30_000);
  let ts: TestService;
  let receiver: Receiver;
  let documented: Conformance;
  const secrets = new Map<string, string>();

  before(async () => {
    // Expiries are set a moment ahead by each billing case; a renewal extends by BILLING_PERIOD.
    ts = await startTestService({ BILLING_PERIOD: '10s' });
    receiver = await startReceiver();
    documented = await conformanceOf(ts.url);
  });
  after(async () => {
    await receiver.close();
    await ts.close();
  });

  const subject = async (plan?: string): Promise<Subject> => {
    const ws = await ts.createWorkspace(plan);
    const created = await ws.api('POST', '/api/v1/webhooks', { url: receiver.url, description: 'catalogue' });
    expect(created.status).to.equal(201);
    secrets.set(ws.workspaceId, String(created.body.secret));
    return {
      ws,
      id: ws.workspaceId,
      secret: String(created.body.secret),
      internal: (method, path, body) => ts.admin(method, `/internal/v1/workspaces/${ws.workspaceId}${path}`, body),
    };
  };

  const ok = (reply: Reply, status = 200): any => {
    expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
    return reply.body;
  };

  const header = (r: ReceivedRequest, name: string) => String(r.headers[name] ?? '');

  /** The receiver's deliveries of `type` in the workspace, parsed, each signature verified. */
  const deliveriesOf = (s: Subject, type: string): Envelope[] =>
    receiver.requests
      .filter((r) => header(r, 'x-webhook-event') === type && JSON.parse(r.body.toString('utf8')).workspace_id === s.id)
      .map((r) => {
        const expected = Buffer.from(`sha256=${createHmac('sha256', s.secret).update(r.body).digest('hex')}`);
        const sent = Buffer.from(header(r, 'x-webhook-signature'));
        expect(sent.length === expected.length && timingSafeEqual(sent, expected), `signature of ${type}`).to.equal(true);
        expect(header(r, 'content-type')).to.match(/^application\/json/);
        expect(header(r, 'x-webhook-id')).to.not.equal('');
        expect(header(r, 'x-webhook-attempt')).to.equal('1');
        expect(documented.deliveryProblems(r), `${type} delivery against the API document`).to.equal('');
        return JSON.parse(r.body.toString('utf8')) as Envelope;
      });

  /**
   * Waits for the workspace's `type` event whose data `match` accepts at the receiver, finds the same
   * envelope in /updates, checks the envelope and its links, and answers it.
   */
  const seen = async (s: Subject, type: string, match: (data: Record<string, any>) => boolean = () => true): Promise<Envelope> => {
    const deadline = Date.now() + 10_000;
    let delivered: Envelope | undefined;
    while ((delivered = deliveriesOf(s, type).find((e) => match(e.data))) === undefined) {
      if (Date.now() > deadline) throw new Error(`no ${type} matching ${match.toString()} reached the receiver; got ${JSON.stringify(deliveriesOf(s, type).map((e) => e.data))}`);
      await sleep(10);
    }
    expect(Object.keys(delivered).sort()).to.deep.equal(['_links', 'data', 'id', 'timestamp', 'type', 'workspace_id']);
    expect(delivered).to.include({ type, workspace_id: s.id });
    expect(delivered.id).to.match(/^[0-9a-f]{32}$/);
    expect(delivered.timestamp).to.match(ISO_MICROS);

    const updates = ok(documented.conforms('get', '/updates', await s.ws.api('GET', `/api/v1/updates?offset=0&types=${type}&timeout=0&limit=1000`)));
    const item = (updates.items as (Envelope & { offset: number })[]).find((i) => i.id === delivered.id);
    expect(item, `${type} ${delivered.id} in /updates`).to.not.equal(undefined);
    const { offset, ...envelope } = item as Envelope & { offset: number };
    expect(offset).to.be.a('number');
    expect(envelope).to.deep.equal(delivered);

    // Links are relative addresses of existing endpoints, answered with the API key.
    for (const link of Object.values(delivered._links)) expect((await s.ws.api('GET', link)).status, link).to.equal(200);
    return delivered;
  };

  /** Exactly these data fields: the catalogue's, plus the conditional ones whose condition holds. */
  const expectFields = (e: Envelope, extra: readonly string[] = []) => {
    expect(Object.keys(e.data).sort(), `${e.type} data ${JSON.stringify(e.data)}`).to.deep.equal([...(FIELDS[e.type] ?? []), ...extra].sort());
  };
  const ticketLinks = (ticketId: string) => ({ ticket: `/api/v1/tickets/${ticketId}`, messages: `/api/v1/tickets/${ticketId}/messages` });
  const contactLinks = (contactId: string) => ({ contact: `/api/v1/contacts/${contactId}`, tickets: `/api/v1/tickets?contact_id=${contactId}` });

  let n = 0;
  const email = () => `catalogue-${Date.now()}-${(n += 1)}@example.com`;
  const newTicket = async (s: Subject, body: Record<string, unknown> = {}): Promise<{ id: string; contactId: string }> => {
    const created = ok(await s.ws.api('POST', '/api/v1/tickets', { contact: { email: email() }, subject: 'Cannot log in', ...body }), 201);
    return { id: String(created.id), contactId: String(created.contact_id) };
  };
  const operatorSays = async (s: Subject, ticketId: string, extra: Record<string, unknown> = {}) =>
    ok(await s.internal('POST', `/tickets/${ticketId}/messages`, { sender: 'operator', operator_id: 'op-1', operator_name: 'Ann', content: 'Looking into it', ...extra }), 201);

  // Billing: a plan that expires a moment ahead, acted on by the service's billing clock.
  const PAYMENT = { currency: 'USD', method: 'card' };
  const pay = async (s: Subject, amount: number) => {
    const id = `pay-${(n += 1)}`;
    ok(await s.internal('POST', '/billing/payments', { payment_id: id, order_id: `order-${id}`, amount, transaction_id: `tx-${id}`, ...PAYMENT }));
  };
  const expireSoon = async (s: Subject, plan: Record<string, unknown>): Promise<string> => {
    const expiresAt = new Date(Date.now() + 300).toISOString();
    ok(await s.internal('PUT', '/billing/subscription', { expires_at: expiresAt, ...plan }));
    return expiresAt;
  };

  // -------------------------------------------------------------------------------------------

  it('covers the 23 catalogue events, the names the service accepts for subscriptions', async () => {
    expect(CATALOGUE).to.have.length(23);
    const s = await subject();
    const refused = await s.ws.api('POST', '/api/v1/webhooks', { url: receiver.url, events: ['no.such.event'] });
    expect(refused.status).to.equal(422);
    expect([...refused.body.detail.valid].sort()).to.deep.equal([...CATALOGUE].sort());
  });

  it('ticket.created: POST /api/v1/tickets', async () => {
    const s = await subject();
    const plain = await newTicket(s);
    const urgent = await newTicket(s, { subject: null, priority: 'high' });
    const e = await seen(s, 'ticket.created', (d) => d['ticket_id'] === plain.id);
    expectFields(e);
    expect(e.data).to.deep.equal({ ticket_id: plain.id, status: 'new', priority: 'normal', contact_id: plain.contactId, subject: 'Cannot log in' });
    expect(e._links).to.deep.equal(ticketLinks(plain.id));
    const high = await seen(s, 'ticket.created', (d) => d['ticket_id'] === urgent.id);
    expectFields(high);
    expect(high.data).to.include({ priority: 'high', subject: null });
    for (const x of [e, high]) {
      expect(TICKET_STATUSES).to.include(x.data['status']);
      expect(PRIORITIES).to.include(x.data['priority']);
    }
  });

  it('ticket.updated: PATCH /api/v1/tickets/{id} (only workspace_id besides ticket_id); a contact reply to a pending ticket, an assignment', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.ws.api('PATCH', `/api/v1/tickets/${t.id}`, { priority: 'high' }));
    const patched = await seen(s, 'ticket.updated', (d) => d['ticket_id'] === t.id);
    expectFields(patched, ['workspace_id']);
    expect(patched.data).to.deep.equal({ ticket_id: t.id, workspace_id: s.id });
    expect(patched._links).to.deep.equal(ticketLinks(t.id));

    // Other sources add what they changed; ticket_id is always there.
    ok(await s.ws.api('PATCH', `/api/v1/tickets/${t.id}`, { status: 'pending' }));
    ok(await s.ws.api('POST', '/api/v1/messages', { ticket_id: t.id, content: 'Any news?' }));
    const reopened = await seen(s, 'ticket.updated', (d) => d['ticket_id'] === t.id && d['status'] === 'open');
    expect(reopened.data).to.include({ ticket_id: t.id, status: 'open' });
    expect(reopened._links).to.deep.equal(ticketLinks(t.id));
    ok(await s.internal('POST', `/tickets/${t.id}/assign`, { operator_id: 'op-1', operator_name: 'Ann' }));
    const assigned = await seen(s, 'ticket.updated', (d) => d['ticket_id'] === t.id && d['operator_id'] === 'op-1');
    expect(assigned.data).to.include({ ticket_id: t.id, status: 'in_progress' });
    for (const e of [reopened, assigned]) expect(TICKET_STATUSES).to.include(e.data['status']);
  });

  it('ticket.assigned: POST /internal/…/tickets/{id}/assign, with and without an avatar, reassignment too', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.internal('POST', `/tickets/${t.id}/assign`, { operator_id: 'op-1', operator_name: 'Ann', operator_avatar_url: 'https://avatars.example.com/ann.png' }));
    const first = await seen(s, 'ticket.assigned', (d) => d['ticket_id'] === t.id && d['operator_id'] === 'op-1');
    expectFields(first);
    expect(first.data).to.deep.equal({ ticket_id: t.id, operator_id: 'op-1', operator_name: 'Ann', operator_avatar_url: 'https://avatars.example.com/ann.png', status: 'in_progress' });
    expect(first._links).to.deep.equal(ticketLinks(t.id));
    ok(await s.internal('POST', `/tickets/${t.id}/assign`, { operator_id: 'op-2', operator_name: 'Ben' }));
    const again = await seen(s, 'ticket.assigned', (d) => d['ticket_id'] === t.id && d['operator_id'] === 'op-2');
    expectFields(again);
    expect(again.data).to.include({ operator_avatar_url: null, status: 'in_progress' });
    expect(TICKET_STATUSES).to.include(again.data['status']);
  });

  it('ticket.transferred: POST /internal/…/tickets/{id}/transfer, to a department, and straight to an operator', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.internal('POST', `/tickets/${t.id}/transfer`, { department_id: 'dept-billing', department_name: 'Billing' }));
    const toDepartment = await seen(s, 'ticket.transferred', (d) => d['ticket_id'] === t.id && d['department_id'] === 'dept-billing');
    expectFields(toDepartment);
    expect(toDepartment.data).to.deep.equal({ ticket_id: t.id, department_id: 'dept-billing', department_name: 'Billing', operator_id: null, operator_name: null });
    expect(toDepartment._links).to.deep.equal(ticketLinks(t.id));
    ok(await s.internal('POST', `/tickets/${t.id}/transfer`, { department_id: 'dept-tech', department_name: 'Technical support', operator_id: 'op-3', operator_name: 'Cy' }));
    const toOperator = await seen(s, 'ticket.transferred', (d) => d['ticket_id'] === t.id && d['department_id'] === 'dept-tech');
    expectFields(toOperator);
    expect(toOperator.data).to.include({ operator_id: 'op-3', operator_name: 'Cy' });
  });

  it('ticket.force_taken: POST /internal/…/tickets/{id}/force-take on a ticket another operator has', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.internal('POST', `/tickets/${t.id}/assign`, { operator_id: 'op-1', operator_name: 'Ann' }));
    ok(await s.internal('POST', `/tickets/${t.id}/force-take`, { operator_id: 'op-2' }));
    const e = await seen(s, 'ticket.force_taken', (d) => d['ticket_id'] === t.id);
    expectFields(e);
    expect(e.data).to.deep.equal({ ticket_id: t.id, operator_id: 'op-2', previous_operator_id: 'op-1' });
    expect(e._links).to.deep.equal(ticketLinks(t.id));
  });

  it('ticket.closed: POST /api/v1/tickets/{id}/close', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.ws.api('POST', `/api/v1/tickets/${t.id}/close`));
    const e = await seen(s, 'ticket.closed', (d) => d['ticket_id'] === t.id);
    expectFields(e);
    expect(e.data['closed_at']).to.match(ISO_MICROS);
    expect(e.data['resolution_secs']).to.be.a('number').and.to.be.at.least(0);
    expect(Number.isInteger(e.data['resolution_secs'])).to.equal(true);
    expect(e._links).to.deep.equal(ticketLinks(t.id));
  });

  it('ticket.reopened: POST /api/v1/tickets/{id}/reopen of a closed ticket', async () => {
    const s = await subject();
    const t = await newTicket(s);
    ok(await s.ws.api('POST', `/api/v1/tickets/${t.id}/close`));
    ok(await s.ws.api('POST', `/api/v1/tickets/${t.id}/reopen`));
    const e = await seen(s, 'ticket.reopened', (d) => d['ticket_id'] === t.id);
    expectFields(e);
    expect(e.data).to.deep.equal({ ticket_id: t.id, status: 'open' });
    expect(TICKET_STATUSES).to.include(e.data['status']);
    expect(e._links).to.deep.equal(ticketLinks(t.id));
  });

  it('ticket.rated: comment when the rating came through the API (null when none was given), none from the widget', async () => {
    const s = await subject();
    const viaApi = await newTicket(s);
    ok(await s.ws.api('POST', `/api/v1/tickets/${viaApi.id}/rate`, { rating: 5, comment: 'Quick and helpful' }));
    const withComment = await seen(s, 'ticket.rated', (d) => d['ticket_id'] === viaApi.id);
    expectFields(withComment, ['comment']);
    expect(withComment.data).to.deep.equal({ ticket_id: viaApi.id, rating: 5, comment: 'Quick and helpful' });
    expect(withComment._links).to.deep.equal(ticketLinks(viaApi.id));

    const bare = await newTicket(s);
    ok(await s.ws.api('POST', `/api/v1/tickets/${bare.id}/rate`, { rating: 3 }));
    const noComment = await seen(s, 'ticket.rated', (d) => d['ticket_id'] === bare.id);
    expectFields(noComment, ['comment']);
    expect(noComment.data).to.deep.equal({ ticket_id: bare.id, rating: 3, comment: null });

    const widget = await newTicket(s);
    ok(await s.internal('POST', `/tickets/${widget.id}/rate`, { rating: 4 }));
    const fromWidget = await seen(s, 'ticket.rated', (d) => d['ticket_id'] === widget.id);
    expectFields(fromWidget);
    expect(fromWidget.data).to.deep.equal({ ticket_id: widget.id, rating: 4 });
  });

  it('message.created: from a contact, the bot (POST /api/v1/tickets/{id}/messages), an operator, an internal note with a file (a link signed for 12 hours)', async () => {
    const s = await subject();
    const t = await newTicket(s, { message: 'My screen is blank' });
    const fromContact = await seen(s, 'message.created', (d) => d['ticket_id'] === t.id && d['sender_type'] === 'contact');
    expectFields(fromContact);
    expect(fromContact.data).to.include({ sender_id: t.contactId, content: 'My screen is blank', is_internal: false });
    expect(fromContact.data['id']).to.equal(fromContact.data['message_id']);
    expect(fromContact.data['media']).to.deep.equal([]);
    expect(fromContact.data['created_at']).to.match(ISO_MICROS);
    expect(fromContact._links).to.deep.equal(ticketLinks(t.id));

    const bot = ok(await s.ws.api('POST', `/api/v1/tickets/${t.id}/messages`, { content: 'An operator will answer shortly' }), 201);
    const fromBot = await seen(s, 'message.created', (d) => d['message_id'] === bot.id);
    expectFields(fromBot);
    expect(fromBot.data).to.include({ sender_type: 'bot', sender_id: s.id, is_internal: false });

    const operator = await operatorSays(s, t.id);
    const fromOperator = await seen(s, 'message.created', (d) => d['message_id'] === operator.id);
    expectFields(fromOperator);
    expect(fromOperator.data).to.include({ sender_type: 'operator', sender_id: 'op-1', sender_name: 'Ann', is_internal: false });

    const form = new FormData();
    form.append('file', new Blob([Buffer.from('screenshot bytes')], { type: 'image/png' }), 'screen.png');
    const uploaded = (await (await fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${s.ws.apiKey}` }, body: form })).json()) as { id: string };
    const note = await operatorSays(s, t.id, { content: 'Known issue, see incident #42', is_internal: true, media_ids: [uploaded.id] });
    const internal = await seen(s, 'message.created', (d) => d['message_id'] === note.id);
    expectFields(internal);
    expect(internal.data['is_internal']).to.equal(true);
    const [file] = internal.data['media'] as { url: string }[];
    expect(file?.url).to.match(new RegExp(`^/api/media/${uploaded.id}\\?expires=\\d+&signature=[0-9a-f]{64}$`));
    const expires = Number(/expires=(\d+)/.exec(file?.url ?? '')?.[1]);
    expect(expires - Date.now() / 1000).to.be.within(12 * 3600 - 60, 12 * 3600 + 1);
    expect((await fetch(`${ts.url}${file?.url}`)).status).to.equal(200);

    for (const e of [fromContact, fromBot, fromOperator, internal]) expect(SENDER_TYPES).to.include(e.data['sender_type']);
  });

  it('message.edited: PATCH /internal/…/tickets/{id}/messages/{message_id}, of a message and of a note', async () => {
    const s = await subject();
    const t = await newTicket(s);
    const reply = await operatorSays(s, t.id, { content: 'Thnaks for waiting' });
    ok(await s.internal('PATCH', `/tickets/${t.id}/messages/${reply.id}`, { content: 'Thanks for waiting' }));
    const e = await seen(s, 'message.edited', (d) => d['message_id'] === reply.id);
    expectFields(e);
    expect(e.data).to.include({ id: reply.id, message_id: reply.id, ticket_id: t.id, content: 'Thanks for waiting', is_internal: false });
    expect(e.data['edited_at']).to.match(ISO_MICROS);
    expect(e._links).to.deep.equal(ticketLinks(t.id));
    const note = await operatorSays(s, t.id, { content: 'note', is_internal: true });
    ok(await s.internal('PATCH', `/tickets/${t.id}/messages/${note.id}`, { content: 'better note' }));
    const edited = await seen(s, 'message.edited', (d) => d['message_id'] === note.id);
    expectFields(edited);
    expect(edited.data['is_internal']).to.equal(true);
  });

  it('message.reaction.added: POST /internal/…/messages/{message_id}/reactions by a widget visitor and by an operator (no ticket_id, so no links)', async () => {
    const s = await subject();
    const t = await newTicket(s);
    const reply = await operatorSays(s, t.id);
    for (const [kind, id, emoji] of [['visitor', t.contactId, '👍'], ['operator', 'op-2', '🙏']] as const) {
      ok(await s.internal('POST', `/tickets/${t.id}/messages/${reply.id}/reactions`, { reactor_kind: kind, reactor_id: id, emoji }));
      const e = await seen(s, 'message.reaction.added', (d) => d['message_id'] === reply.id && d['reactor_id'] === id);
      expectFields(e);
      expect(e.data).to.deep.equal({ message_id: reply.id, reactor_kind: kind, reactor_id: id, emoji });
      expect(e._links).to.deep.equal({});
    }
  });

  it('message.reaction.removed: DELETE /internal/…/messages/{message_id}/reactions/{reactor_id} by the widget visitor', async () => {
    const s = await subject();
    const t = await newTicket(s);
    const reply = await operatorSays(s, t.id);
    ok(await s.internal('POST', `/tickets/${t.id}/messages/${reply.id}/reactions`, { reactor_kind: 'visitor', reactor_id: t.contactId, emoji: '❤️' }));
    ok(await s.internal('DELETE', `/tickets/${t.id}/messages/${reply.id}/reactions/${t.contactId}`));
    const e = await seen(s, 'message.reaction.removed', (d) => d['message_id'] === reply.id);
    expectFields(e);
    expect(e.data).to.deep.equal({ message_id: reply.id, reactor_id: t.contactId });
    expect(e._links).to.deep.equal({});
  });

  it('contact.created: the widget identifies a visitor the first time (POST /internal/…/contacts/identify); contacts of other channels emit none', async () => {
    const s = await subject();
    const address = email();
    const visitor = ok(await s.internal('POST', '/contacts/identify', { email: address, full_name: 'Dee Visitor', internal_id: 'site-user-7' }));
    const e = await seen(s, 'contact.created', (d) => d['id'] === visitor.id);
    expectFields(e);
    expect(e.data).to.deep.equal({ id: visitor.id, internal_id: 'site-user-7', email: address, full_name: 'Dee Visitor', phone: null, telegram_id: null });
    expect(e._links).to.deep.equal(contactLinks(visitor.id));

    // An API contact, an API ticket's contact and a Telegram contact writing in: no contact.* at all.
    const apiContact = ok(await s.ws.api('POST', '/api/v1/contacts', { email: email(), full_name: 'Api Person' }), 201);
    const ticketContact = await newTicket(s);
    const inbound = ok(await s.ws.api('POST', '/api/v1/messages', { content: 'hello', contact: { telegram_id: 424242 } }));
    const telegramTicket = ok(await s.ws.api('GET', `/api/v1/tickets/${inbound.ticket_id}`));
    // A later widget identify is the marker: once it has arrived, anything earlier would have too.
    const marker = ok(await s.internal('POST', '/contacts/identify', { email: email() }));
    await seen(s, 'contact.identified', (d) => d['id'] === marker.id);
    const others = [apiContact.id, ticketContact.contactId, telegramTicket.contact_id];
    for (const type of ['contact.created', 'contact.identified']) {
      expect(deliveriesOf(s, type).filter((x) => others.includes(x.data['id']))).to.deep.equal([]);
      const feed = ok(documented.conforms('get', '/updates', await s.ws.api('GET', `/api/v1/updates?offset=0&types=${type}&timeout=0`)));
      expect(feed.items.filter((x: Envelope) => others.includes(x.data['id']))).to.deep.equal([]);
    }
  });

  it('contact.identified: every identify call of the widget, the first one included', async () => {
    const s = await subject();
    const address = email();
    const first = ok(await s.internal('POST', '/contacts/identify', { email: address }));
    ok(await s.internal('POST', '/contacts/identify', { email: address, phone: '+15550100', telegram_id: '777' }));
    const e = await seen(s, 'contact.identified', (d) => d['id'] === first.id && d['phone'] === '+15550100');
    expectFields(e);
    expect(e.data).to.deep.equal({ id: first.id, internal_id: null, email: address, full_name: null, phone: '+15550100', telegram_id: '777' });
    expect(e._links).to.deep.equal(contactLinks(first.id));
    expect(deliveriesOf(s, 'contact.identified').filter((x) => x.data['id'] === first.id)).to.have.length(2);
  });

  it('visitor.reply_waiting: POST /internal/…/tickets/{id}/reply-waiting for a widget visitor, visitor notifications on (links {} although it has ticket_id)', async () => {
    const s = await subject();
    ok(await s.internal('PUT', '/widget', { visitor_notifications: true }));
    const address = email();
    const visitor = ok(await s.internal('POST', '/contacts/identify', { email: address, internal_id: 'site-user-9' }));
    const t = await newTicket(s, { contact: { email: address }, message: 'hi' });
    const reply = await operatorSays(s, t.id, { content: 'Here is your answer' });
    expect(ok(await s.internal('POST', `/tickets/${t.id}/reply-waiting`, { message_id: reply.id, operator_name: 'Ann', locale: 'de', surface: 'widget' }))).to.deep.equal({ emitted: true });
    const e = await seen(s, 'visitor.reply_waiting', (d) => d['ticket_id'] === t.id);
    expectFields(e);
    expect(e.data).to.include({
      contact_id: visitor.id,
      external_id: 'site-user-9',
      telegram_user_id: null,
      ticket_id: t.id,
      message_id: reply.id,
      operator_name: 'Ann',
      preview: 'Here is your answer',
      locale: 'de',
      surface: 'widget',
    });
    expect(e.data['ticket_short_id']).to.be.a('string').that.is.not.empty;
    expect(e.data['open_url']).to.be.a('string');
    expect(e.data['replied_at']).to.match(ISO_MICROS);
    expect(e._links).to.deep.equal({});
  });

  it('operator.status.changed: POST /internal/…/operators/{user_id}/status, through every status', async () => {
    const s = await subject();
    // An operator starts offline: online first, offline last.
    for (const status of OPERATOR_STATUSES) {
      const body = status === 'custom' ? { status, status_text: 'In a meeting', status_emoji: '📅' } : { status };
      ok(await s.internal('POST', '/operators/op-7/status', body));
      const e = await seen(s, 'operator.status.changed', (d) => d['status'] === status);
      expectFields(e);
      expect(e.data).to.deep.equal({ user_id: 'op-7', status_text: null, status_emoji: null, ...body });
      expect(OPERATOR_STATUSES).to.include(e.data['status']);
      expect(e._links).to.deep.equal({});
    }
  });

  it('billing.payment_received: POST /internal/…/billing/payments (amounts are numbers)', async () => {
    const s = await subject();
    ok(await s.internal('POST', '/billing/payments', { payment_id: 'pay-1', order_id: 'ord-1', amount: 45.5, currency: 'USD', method: 'card', transaction_id: 'tx-1' }));
    const e = await seen(s, 'billing.payment_received', (d) => d['payment_id'] === 'pay-1');
    expectFields(e);
    expect(e.data).to.deep.equal({ payment_id: 'pay-1', order_id: 'ord-1', amount: 45.5, currency: 'USD', method: 'card', transaction_id: 'tx-1', new_balance: 45.5 });
    expect(e._links).to.deep.equal({});
  });

  it('billing.payment_failed: POST /internal/…/billing/payments/failed (the gateway reports it cancelled)', async () => {
    const s = await subject();
    ok(await s.internal('POST', '/billing/payments/failed', { payment_id: 'pay-2', order_id: 'ord-2', amount: 10, method: 'card', reason: 'Cancelled by the payer' }));
    const e = await seen(s, 'billing.payment_failed', (d) => d['payment_id'] === 'pay-2');
    expectFields(e);
    expect(e.data).to.deep.equal({ payment_id: 'pay-2', order_id: 'ord-2', amount: 10, method: 'card', reason: 'Cancelled by the payer' });
    expect(e._links).to.deep.equal({});
  });

  it('billing.plan_renewed: the billing clock at expiry (trigger auto), and POST …/billing/renewals (trigger manual)', async () => {
    const s = await subject();
    await pay(s, 100);
    const expiry = await expireSoon(s, { plan: 'team', price: 30, auto_renew: true });
    const auto = await seen(s, 'billing.plan_renewed', (d) => d['trigger'] === 'auto');
    expectFields(auto);
    expect(auto.data).to.deep.equal({ plan: 'team', amount: 30, new_balance: 70, expires_at: new Date(Date.parse(expiry) + 10_000).toISOString(), trigger: 'auto' });
    expect(auto._links).to.deep.equal({});
    ok(await s.internal('POST', '/billing/renewals', { trigger: 'manual' }));
    const manual = await seen(s, 'billing.plan_renewed', (d) => d['trigger'] === 'manual');
    expectFields(manual);
    expect(manual.data).to.include({ plan: 'team', amount: 30, new_balance: 40 });
    for (const e of [auto, manual]) expect(TRIGGERS).to.include(e.data['trigger']);
  });

  it('billing.plan_changed: to the chosen next plan (amount and new_balance when paid, none when it costs nothing), and a trial turned paid (reason too)', async () => {
    const [next, free, trial] = await Promise.all([subject(), subject(), subject()]);
    await Promise.all([pay(next, 100), pay(trial, 50)]);
    await Promise.all([
      expireSoon(next, { plan: 'team', price: 30, next_plan: { plan: 'business', price: 60 } }),
      expireSoon(free, { plan: 'team', price: 30, next_plan: { plan: 'business', price: 0 } }),
      expireSoon(trial, { plan: 'business', price: 0, trial: true, next_plan: { plan: 'team', price: 30 } }),
    ]);
    const paid = await seen(next, 'billing.plan_changed');
    expectFields(paid, ['amount', 'new_balance']);
    expect(paid.data).to.include({ old_plan: 'team', new_plan: 'business', amount: 60, new_balance: 40 });
    expect(paid._links).to.deep.equal({});

    const unpaid = await seen(free, 'billing.plan_changed');
    expectFields(unpaid);
    expect(unpaid.data).to.include({ old_plan: 'team', new_plan: 'business' });

    const converted = await seen(trial, 'billing.plan_changed');
    expectFields(converted, ['amount', 'new_balance', 'reason']);
    expect(converted.data).to.include({ old_plan: 'business', new_plan: 'team', amount: 30, new_balance: 20 });
    expect(converted.data['reason']).to.be.a('string');
    for (const e of [paid, unpaid, converted]) expect(e.data['expires_at']).to.be.a('string');
  });

  it('billing.plan_downgraded: an insufficient balance, auto-renewal off (no reason), a trial ended unpaid (reason)', async () => {
    const [poor, off, trial] = await Promise.all([subject(), subject(), subject()]);
    await pay(off, 100);
    await Promise.all([
      expireSoon(poor, { plan: 'team', price: 30 }),
      expireSoon(off, { plan: 'team', price: 30, auto_renew: false }),
      expireSoon(trial, { plan: 'team', price: 0, trial: true }),
    ]);
    const insufficient = await seen(poor, 'billing.plan_downgraded');
    expectFields(insufficient);
    expect(insufficient.data).to.include({ old_plan: 'team', new_plan: 'free' });
    expect(insufficient._links).to.deep.equal({});

    const disabled = await seen(off, 'billing.plan_downgraded');
    expectFields(disabled);

    const ended = await seen(trial, 'billing.plan_downgraded');
    expectFields(ended, ['reason']);
    expect(ended.data['reason']).to.be.a('string');
  });

  it('billing.balance_low: a renewal attempt below the price, by the clock at expiry (no trigger) and manual (trigger manual)', async () => {
    const [early, due] = await Promise.all([subject(), subject()]);
    await Promise.all([pay(early, 10), pay(due, 10)]);
    await expireSoon(due, { plan: 'team', price: 30 });
    ok(await early.internal('PUT', '/billing/subscription', { plan: 'team', price: 30, expires_at: new Date(Date.now() + 86_400_000).toISOString() }));
    ok(await early.internal('POST', '/billing/renewals', { trigger: 'manual' }));
    const manual = await seen(early, 'billing.balance_low');
    expectFields(manual, ['trigger']);
    expect(manual.data).to.deep.equal({ plan: 'team', balance: 10, price: 30, shortfall: 20, trigger: 'manual' });
    expect(TRIGGERS).to.include(manual.data['trigger']);
    expect(manual._links).to.deep.equal({});

    const auto = await seen(due, 'billing.balance_low');
    expectFields(auto);
    expect(auto.data).to.deep.equal({ plan: 'team', balance: 10, price: 30, shortfall: 20 });
  });

  it('billing.subscription_expired: insufficient_balance and auto_renew_disabled', async () => {
    const [poor, off] = await Promise.all([subject(), subject()]);
    await pay(off, 100);
    const [expiry] = await Promise.all([expireSoon(poor, { plan: 'business', price: 60 }), expireSoon(off, { plan: 'team', price: 30, auto_renew: false })]);
    const insufficient = await seen(poor, 'billing.subscription_expired');
    expectFields(insufficient);
    expect(insufficient.data).to.deep.equal({ old_plan: 'business', reason: 'insufficient_balance', expired_at: expiry });
    expect(insufficient._links).to.deep.equal({});

    const disabled = await seen(off, 'billing.subscription_expired');
    expectFields(disabled);
    expect(disabled.data).to.include({ old_plan: 'team', reason: 'auto_renew_disabled' });
    for (const e of [insufficient, disabled]) expect(EXPIRY_REASONS).to.include(e.data['reason']);
  });
});
