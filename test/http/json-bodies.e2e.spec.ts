// One rule for JSON bodies on every route that takes one: the body is a JSON object, and each field
// has its JSON type (no number written as a string). `null`, an empty body, an array or a scalar is
// the same schema 422 on every such route.
import { expect } from 'chai';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { ticketId } from '../support/tickets-fixtures.js';

describe('JSON bodies (e2e)', () => {
  let ts: TestService;
  let ws: TestWorkspace;
  let ticket: string;
  let webhook: string;

  before(async () => {
    ts = await startTestService();
    ws = await ts.createWorkspace();
    ticket = await ticketId(ws);
    webhook = String((await ws.api('POST', '/api/v1/webhooks', { url: 'https://example.com/hook' })).body.id);
  });
  after(() => ts.close());

  const notAnObject: [string, string][] = [
    ['null', 'null'],
    ['empty', ''],
    ['array', '[]'],
    ['string', '"x"'],
    ['number', '5'],
  ];

  it('answers a body that is not a JSON object with the same 422 on every route that takes one', async () => {
    const routes = () => [
      ['PATCH', `/api/v1/webhooks/${webhook}`],
      ['PATCH', `/api/v1/tickets/${ticket}`],
      ['POST', '/api/v1/webhooks'],
      ['POST', '/api/v1/tickets'],
      ['POST', `/api/v1/tickets/${ticket}/messages`],
      ['POST', `/api/v1/tickets/${ticket}/rate`],
    ];
    for (const [method, path] of routes()) {
      for (const [name, body] of notAnObject) {
        const reply = await ws.api(method as string, path as string, body, { 'content-type': 'application/json' });
        expect(reply.status, `${method} ${path} with ${name}`).to.equal(422);
        expect(reply.body, `${method} ${path} with ${name}`).to.deep.equal({ detail: [{ type: 'type_error', loc: ['body'], msg: 'Input should be a JSON object' }] });
      }
    }
    const unchanged = await ws.api('GET', '/api/v1/webhooks');
    expect(unchanged.body.items).to.have.length(1);
  });

  it('takes a rating only as a JSON integer from 1 to 5', async () => {
    for (const rating of ['5', ' 5', '5 ', 5.5, true, null, 0, 6]) {
      const reply = await ws.api('POST', `/api/v1/tickets/${ticket}/rate`, { rating });
      expect(reply.status, JSON.stringify(rating)).to.equal(422);
      expect(reply.body.detail[0], JSON.stringify(rating)).to.include({ type: 'type_error', msg: 'Input should be an integer from 1 to 5' });
      expect(reply.body.detail[0].loc).to.deep.equal(['body', 'rating']);
    }
    expect((await ws.api('POST', `/api/v1/tickets/${ticket}/rate`, { rating: 5 })).status).to.equal(200);
  });

  it('says what each route takes when the body is of another type', async () => {
    const content = (reply: { body: { detail: { loc: unknown; msg: string }[] } }) => reply.body.detail[0];
    for (const [body, type] of [
      ['plain text', 'text/plain'],
      ['{"file":"abc"}', 'application/json'],
    ]) {
      const upload = await ws.api('POST', '/api/v1/media/upload', body, { 'content-type': type as string });
      expect(upload.status).to.equal(422);
      expect(content(upload)).to.deep.equal({ type: 'content_type', loc: ['header', 'content-type'], msg: 'Expected multipart/form-data with a file part named "file"' });
    }
    const form = new FormData();
    form.append('subject', 'x');
    const ticket = await fetch(`${ts.url}/api/v1/tickets`, { method: 'POST', headers: { authorization: `Bearer ${ws.apiKey}` }, body: form });
    expect(ticket.status).to.equal(422);
    expect(((await ticket.json()) as { detail: unknown[] }).detail[0]).to.deep.equal({
      type: 'content_type',
      loc: ['header', 'content-type'],
      msg: 'Expected a JSON body with Content-Type application/json',
    });
  });

  it('still reads page numbers from the query string as digits', async () => {
    expect((await ws.api('GET', '/api/v1/tickets?page=1&page_size=5')).status).to.equal(200);
  });
});
