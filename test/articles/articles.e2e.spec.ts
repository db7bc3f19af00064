// Knowledge base over HTTP: plan gating (403 PLAN_FEATURE_UNAVAILABLE), the article life cycle and
// 404 ARTICLE_NOT_FOUND, against the real server.
import { expect } from 'chai';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const UNKNOWN = '0'.repeat(32);

describe('knowledge base /api/v1/articles (e2e)', () => {
  let ts: TestService;
  let team: TestWorkspace;

  before(async () => {
    ts = await startTestService();
    team = await ts.createWorkspace('team');
  });
  after(() => ts.close());

  it('answers 403 PLAN_FEATURE_UNAVAILABLE on every endpoint for a plan without it', async () => {
    const free = await ts.createWorkspace('free');
    const calls: [string, string, unknown?][] = [
      ['POST', '/api/v1/articles', { title: 'T', body: 'B' }],
      ['POST', '/api/v1/articles', { nonsense: true }],
      ['GET', '/api/v1/articles'],
      ['GET', `/api/v1/articles/${UNKNOWN}`],
      ['PATCH', `/api/v1/articles/${UNKNOWN}`, { title: 'x' }],
      ['DELETE', `/api/v1/articles/${UNKNOWN}`],
    ];
    for (const [method, path, body] of calls) {
      const reply = await free.api(method, path, body);
      expect(reply.status, `${method} ${path}`).to.equal(403);
      expect(reply.body).to.include({ error_code: 'PLAN_FEATURE_UNAVAILABLE', request_id: reply.headers.get('x-request-id') });
      expect(reply.body.detail).to.deep.equal({ feature: 'knowledge_base', plan: 'free', plans_with_feature: ['team', 'business'] });
    }
  });

  it('says how to get the knowledge base: the admin call that changes the plan, which then opens it', async () => {
    const free = await ts.createWorkspace('free');
    const refused = await free.api('GET', '/api/v1/articles');
    expect(refused.body.error_message).to.equal(
      `The knowledge base is not included in the free plan; it is in team, business. An administrator changes the plan with PATCH /admin/v1/workspaces/${free.workspaceId} {"plan": "team"}`,
    );
    const [, method, path, body] = /(PATCH) (\S+) (.*)$/.exec(refused.body.error_message) ?? [];
    expect((await ts.admin(method!, path!, JSON.parse(body!))).status).to.equal(200);
    expect((await free.api('GET', '/api/v1/articles')).status).to.equal(200);
  });

  it('says no plan has it when none does', async () => {
    const none = await startTestService({ PLANS: 'free:100:false,team:5000:false' });
    try {
      const ws = await none.createWorkspace();
      const refused = await ws.api('GET', '/api/v1/articles');
      expect(refused.status).to.equal(403);
      expect(refused.body.error_message).to.equal('The knowledge base is not included in the free plan, nor in any plan of this server (PLANS)');
    } finally {
      await none.close();
    }
  });

  it('creates, lists, reads, updates and deletes an article', async () => {
    const created = await team.api('POST', '/api/v1/articles', { title: 'Resetting a password', body: 'Open settings…' });
    expect(created.status).to.equal(201);
    const id = String(created.body.id);
    expect(created.body).to.include({ title: 'Resetting a password', body: 'Open settings…' });
    expect(created.body.created_at).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);

    const listed = await team.api('GET', '/api/v1/articles?page_size=1');
    expect(listed.status).to.equal(200);
    expect(listed.body).to.deep.include({ page: 1, page_size: 1, total: 1 });
    expect(listed.body.items).to.deep.equal([created.body]);

    const patched = await team.api('PATCH', `/api/v1/articles/${id}`, { body: 'Open the account page.' });
    expect(patched.status).to.equal(200);
    expect(patched.body).to.include({ id, title: 'Resetting a password', body: 'Open the account page.' });
    expect((await team.api('GET', `/api/v1/articles/${id}`)).body).to.deep.equal(patched.body);

    const deleted = await team.api('DELETE', `/api/v1/articles/${id}`);
    expect(deleted.status).to.equal(204);
    const gone = await team.api('GET', `/api/v1/articles/${id}`);
    expect(gone.status).to.equal(404);
    expect(gone.body).to.deep.include({ error_code: 'ARTICLE_NOT_FOUND', detail: { article_id: id } });
    expect((await team.api('PATCH', `/api/v1/articles/${id}`, { title: 'again' })).status).to.equal(404);
    expect((await team.api('GET', '/api/v1/articles')).body.total).to.equal(0);
  });

  it('hides other workspaces\' articles (404 ARTICLE_NOT_FOUND)', async () => {
    const other = await ts.createWorkspace('business');
    const created = await other.api('POST', '/api/v1/articles', { title: 'Theirs', body: '' });
    const id = String(created.body.id);
    for (const [method, body] of [['GET'], ['PATCH', { title: 'mine' }], ['DELETE']] as const) {
      const reply = await team.api(method, `/api/v1/articles/${id}`, body);
      expect(reply.status, method).to.equal(404);
      expect(reply.body.error_code).to.equal('ARTICLE_NOT_FOUND');
    }
    expect((await other.api('GET', `/api/v1/articles/${id}`)).body.title).to.equal('Theirs');
  });

  it('validates bodies: schema 422 for shape, VALIDATION_ERROR for a blank title', async () => {
    const missing = await team.api('POST', '/api/v1/articles', { title: 'No body' });
    expect(missing.status).to.equal(422);
    expect(missing.body.detail).to.deep.equal([{ type: 'missing', loc: ['body', 'body'], msg: 'Field required' }]);
    const extra = await team.api('POST', '/api/v1/articles', { title: 'T', body: 'B', tags: [] });
    expect(extra.body.detail[0]).to.include({ type: 'extra_forbidden' });
    const blank = await team.api('POST', '/api/v1/articles', { title: '  ', body: 'B' });
    expect(blank.status).to.equal(422);
    expect(blank.body).to.deep.include({ error_code: 'VALIDATION_ERROR', detail: { field: 'title', reason: 'blank' } });
    expect((await team.api('PATCH', `/api/v1/articles/${UNKNOWN}`, {})).status).to.equal(422);
  });

  it('follows plan changes: a downgrade to the entry plan closes the knowledge base', async () => {
    const ws = await ts.createWorkspace('team');
    expect((await ws.api('GET', '/api/v1/articles')).status).to.equal(200);
    expect((await ts.admin('PATCH', `/admin/v1/workspaces/${ws.workspaceId}`, { plan: 'free' })).status).to.equal(200);
    expect((await ws.api('GET', '/api/v1/articles')).status).to.equal(403);
  });
});
