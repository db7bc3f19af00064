import { expect } from 'chai';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { eventsOf, expectBusinessError, expectSchemaError, expectShortError, uniqueEmail } from '../support/tickets-fixtures.js';

describe('contacts API (e2e)', () => {
  let test: TestService;
  let ws: TestWorkspace;

  before(async () => {
    test = await startTestService();
    ws = await test.createWorkspace();
  });
  after(() => test.close());

  it('POST /contacts upserts: 201 for a new and for an existing contact, fields updated', async () => {
    const email = uniqueEmail();
    const created = await ws.api('POST', '/api/v1/contacts', { email, full_name: 'Ann' });
    expect(created.status).to.equal(201);
    expect(created.body).to.include({ email, full_name: 'Ann', telegram_id: null, is_blocked: false });
    const again = await ws.api('POST', '/api/v1/contacts', { email, phone: '+100', telegram_id: 777 });
    expect(again.status).to.equal(201);
    expect(again.body).to.include({ id: created.body.id, full_name: 'Ann', phone: '+100', telegram_id: '777' });
    const byTelegram = await ws.api('POST', '/api/v1/contacts', { telegram_id: '777' });
    expect(byTelegram.body.id).to.equal(created.body.id);
    expect((await ws.api('GET', `/api/v1/contacts/${created.body.id}`)).body).to.deep.equal(byTelegram.body);
  });

  it('400 short form without telegram_id and email; schema 422 for wrong types', async () => {
    expectShortError(await ws.api('POST', '/api/v1/contacts', { full_name: 'Ann' }), 400);
    expectShortError(await ws.api('POST', '/api/v1/contacts', {}), 400);
    expectSchemaError(await ws.api('POST', '/api/v1/contacts', { email: 5 }), 'email');
  });

  it('concurrent upserts of one identity make one contact', async () => {
    const email = uniqueEmail();
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => ws.api('POST', '/api/v1/contacts', i % 2 === 0 ? { email } : { email, telegram_id: `tg-${email}` })));
    expect(replies.map((r) => r.status)).to.deep.equal(Array(10).fill(201));
    expect(new Set(replies.map((r) => r.body.id)).size).to.equal(1);
  });

  it('emits no public contact.* event (those are widget-only)', async () => {
    await ws.api('POST', '/api/v1/contacts', { email: uniqueEmail() });
    const types = (await eventsOf(test, ws.workspaceId)).map((e) => e.type);
    expect(types).to.include('contact.registered');
    expect(types).to.not.include.members(['contact.created', 'contact.identified']);
  });

  it("404 CONTACT_NOT_FOUND for an unknown id and for another workspace's contact", async () => {
    const other = await test.createWorkspace();
    const created = await ws.api('POST', '/api/v1/contacts', { email: uniqueEmail() });
    expectBusinessError(await other.api('GET', `/api/v1/contacts/${created.body.id}`), 404, 'CONTACT_NOT_FOUND');
    expectBusinessError(await ws.api('GET', '/api/v1/contacts/nope'), 404, 'CONTACT_NOT_FOUND');
    const same = await other.api('POST', '/api/v1/contacts', { email: created.body.email });
    expect(same.body.id).to.not.equal(created.body.id);
  });

  it('needs the API key', async () => {
    const reply = await call(`${test.url}/api/v1/contacts`, 'POST', null, { email: uniqueEmail() });
    expect(reply.status).to.equal(401);
  });
});
