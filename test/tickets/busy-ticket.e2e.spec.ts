// A busy ticket: 64 writers post to one ticket at once, as a bot, operators and an integration do in
// a live chat. Every post is a 201, every message is listed once and reaches /updates once, and the
// list's order is the order of the offsets.
import { expect } from 'chai';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { ticketId } from '../support/tickets-fixtures.js';

const WRITERS = 64;
const EACH = 5;

describe('a busy ticket (e2e)', function () {
  this.timeout(120_000);
  let ts: TestService;
  let ws: TestWorkspace;

  before(async () => {
    ts = await startTestService({ RATE_LIMIT_PER_KEY: '1000000' });
    ws = await ts.createWorkspace();
  });
  after(() => ts.close());

  it('answers 64 concurrent writers with 201 each, and lists and publishes every message once in offset order', async () => {
    const id = await ticketId(ws);
    const statuses = await Promise.all(
      Array.from({ length: WRITERS }, async (_, writer) => {
        const seen: number[] = [];
        for (let i = 0; i < EACH; i++) seen.push((await ws.api('POST', `/api/v1/tickets/${id}/messages`, { content: `w${writer} m${i}` })).status);
        return seen;
      }),
    );
    expect(statuses.flat().filter((s) => s !== 201)).to.deep.equal([]);

    const listed: string[] = [];
    for (let page = 1; ; page++) {
      const reply = await ws.api('GET', `/api/v1/tickets/${id}/messages?page=${page}&page_size=100`);
      listed.push(...reply.body.items.map((m: { content: string }) => m.content));
      if (reply.body.items.length < 100) break;
    }
    const posted = listed.filter((c) => /^w\d+ m\d+$/.test(c));
    expect(posted).to.have.length(WRITERS * EACH);
    expect(new Set(posted).size).to.equal(WRITERS * EACH);

    const published: { content: string; offset: number }[] = [];
    for (let offset = 0; ; ) {
      const reply = await ws.api('GET', `/api/v1/updates?offset=${offset}&types=message.created&limit=1000&timeout=0`);
      if (reply.body.items.length === 0) break;
      published.push(...reply.body.items.map((e: { data: { content: string }; offset: number }) => ({ content: e.data.content, offset: e.offset })));
      offset = reply.body.next_offset;
    }
    const ours = published.filter((e) => /^w\d+ m\d+$/.test(e.content));
    expect(ours.map((e) => e.content).sort()).to.deep.equal([...posted].sort());
    const offsets = ours.map((e) => e.offset);
    expect(offsets).to.deep.equal([...offsets].sort((a, b) => a - b));
    expect(new Set(offsets).size).to.equal(offsets.length);
    // Each writer's own messages keep the order it posted them in, in the list and in /updates.
    for (let writer = 0; writer < WRITERS; writer++) {
      const own = (list: string[]) => list.filter((c) => c.startsWith(`w${writer} `));
      const expected = Array.from({ length: EACH }, (_, i) => `w${writer} m${i}`);
      expect(own(posted)).to.deep.equal(expected);
      expect(own(ours.map((e) => e.content))).to.deep.equal(expected);
    }
    expect(ours.map((e) => e.content)).to.deep.equal(posted);
  });
});
