import { expect } from 'chai';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { toEnvelope } from '../../src/domain/envelope.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { MemoryNotifier } from '../../src/updates/memory.js';
import { call, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { appendEvents, internalEvent, operatorStatus, ticketUpdated } from '../support/updates-events.js';

const waitUntil = async (check: () => boolean) => {
  for (let i = 0; !check(); i++) {
    if (i > 1000) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 5));
  }
};

describe('GET /api/v1/updates', () => {
  let svc: TestService;
  let ws: TestWorkspace;
  const log = () => svc.service.core.log;
  const waiting = () => (svc.service.core.notifier as MemoryNotifier).listenerCount();
  const updates = (query: string) => ws.api('GET', `/api/v1/updates?${query}`);
  const tickets = (n: number, prefix = 't') => Array.from({ length: n }, (_, i) => ticketUpdated(`${prefix}${i}`));

  beforeEach(async () => {
    svc = await startTestService();
    ws = await svc.createWorkspace();
  });
  afterEach(() => svc.close());

  it('offset 0 returns the whole history as webhook envelopes plus offset, in offset order', async () => {
    const records = await appendEvents(log(), ws.workspaceId, [...tickets(3), operatorStatus('u1')]);
    const reply = await updates('timeout=0');
    expect(reply.status).to.equal(200);
    expect(reply.body.items).to.deep.equal(records.map((r) => ({ ...toEnvelope(r), offset: r.offset })));
    expect(reply.body.items[0]._links).to.deep.equal({ ticket: '/api/v1/tickets/t0', messages: '/api/v1/tickets/t0/messages' });
    expect(reply.body.next_offset).to.equal((records.at(-1)?.offset as number) + 1);
    const offsets = reply.body.items.map((i: { offset: number }) => i.offset);
    expect(offsets).to.deep.equal([...offsets].sort((a, b) => a - b));
  });

  it('includes an event at exactly the asked offset and excludes it one microsecond later', async () => {
    const [, second] = await appendEvents(log(), ws.workspaceId, tickets(3));
    const at = (second as RecordedEvent).offset as number;
    expect((await updates(`offset=${at}&timeout=0`)).body.items.map((i: { id: string }) => i.id)[0]).to.equal(second?.id);
    const after = await updates(`offset=${at + 1}&timeout=0`);
    expect(after.body.items).to.have.length(1);
    expect(after.body.items[0].id).not.to.equal(second?.id);
  });

  it('from the current time in microseconds returns only later events', async () => {
    await appendEvents(log(), ws.workspaceId, tickets(2, 'old'));
    const now = svc.service.core.clock();
    const empty = await updates(`offset=${now}&timeout=0`);
    expect(empty.body).to.deep.equal({ items: [], next_offset: now });
    const [fresh] = await appendEvents(log(), ws.workspaceId, tickets(1, 'new'));
    const reply = await updates(`offset=${now}&timeout=0`);
    expect(reply.body.items.map((i: { id: string }) => i.id)).to.deep.equal([fresh?.id]);
  });

  it('chains next_offset without loss or duplicates while thousands of events are appended', async () => {
    const total = 3000;
    const appended: string[] = [];
    const appender = (async () => {
      for (let i = 0; i < total; i += 50) {
        const records = await appendEvents(log(), ws.workspaceId, tickets(50, `c${i}-`), `s${i % 7}`);
        appended.push(...records.map((r) => r.id));
      }
    })();
    const received: string[] = [];
    let offset = 0;
    while (received.length < total) {
      const reply = await updates(`offset=${offset}&limit=${37 + (received.length % 100)}&timeout=10`);
      expect(reply.status).to.equal(200);
      received.push(...reply.body.items.map((i: { id: string }) => i.id));
      offset = reply.body.next_offset;
    }
    await appender;
    expect(received).to.deep.equal(appended);
    expect((await updates(`offset=${offset}&timeout=0`)).body.items).to.deep.equal([]);
  });

  it('filters by types, repeated or comma separated', async () => {
    await appendEvents(log(), ws.workspaceId, [ticketUpdated('a'), operatorStatus('u'), ticketUpdated('b')]);
    const comma = await updates('types=operator.status.changed,ticket.closed&timeout=0');
    expect(comma.body.items.map((i: { type: string }) => i.type)).to.deep.equal(['operator.status.changed']);
    const repeated = await updates('types=ticket.updated&types=ticket.updated&timeout=0');
    expect(repeated.body.items.map((i: { data: { ticket_id: string } }) => i.data.ticket_id)).to.deep.equal(['a', 'b']);
  });

  it('refuses an unknown type with a schema 422 naming it', async () => {
    const reply = await updates('types=ticket.updated,ticket.exploded');
    expect(reply.status).to.equal(422);
    expect(reply.body.detail[0].loc).to.deep.equal(['query', 'types']);
    const [unknown] = String(reply.body.detail[0].msg).split('Valid:');
    expect(unknown).to.contain('ticket.exploded').and.not.contain('ticket.updated');
  });

  for (const [query, field] of [
    ['offset=-1', 'offset'],
    ['offset=abc', 'offset'],
    ['offset=1.5', 'offset'],
    ['offset=9007199254740993', 'offset'],
    ['offset=1&offset=2', 'offset'],
    ['limit=0', 'limit'],
    ['limit=100000', 'limit'],
    ['timeout=3600', 'timeout'],
    ['timeout=-1', 'timeout'],
    ['types=', 'types'],
    ['types=ticket.updated,,ticket.closed', 'types'],
    ['cursor=5', 'cursor'],
  ] as const) {
    it(`answers ${query} with a schema 422 on ${field}`, async () => {
      const reply = await updates(query);
      expect(reply.status).to.equal(422);
      expect(reply.body.detail.map((p: { loc: string[] }) => p.loc)).to.deep.include(['query', field]);
    });
  }

  it('refuses an offset more than a day ahead of the server clock, accepts one just ahead', async () => {
    const now = svc.service.core.clock();
    expect((await updates(`offset=${now + 2 * 86_400_000_000}`)).status).to.equal(422);
    expect((await updates(`offset=${now * 1000}`)).status).to.equal(422);
    expect((await updates(`offset=${now + 60_000_000}&timeout=0`)).body).to.deep.equal({ items: [], next_offset: now + 60_000_000 });
  });

  it('shows only the key\'s workspace and never internal events', async () => {
    const other = await svc.createWorkspace();
    await appendEvents(log(), other.workspaceId, tickets(2, 'theirs'));
    await appendEvents(log(), ws.workspaceId, [internalEvent]);
    const [mine] = await appendEvents(log(), ws.workspaceId, tickets(1, 'mine'));
    const reply = await updates('timeout=0');
    expect(reply.body.items.map((i: { id: string }) => i.id)).to.deep.equal([mine?.id]);
    expect(reply.body.items.every((i: { type: string }) => (PUBLIC_EVENT_TYPES as readonly string[]).includes(i.type))).to.equal(true);
  });

  it('a waiting poll returns as soon as a matching event is appended', async () => {
    const before = waiting();
    const pending = updates('types=operator.status.changed&timeout=30');
    await waitUntil(() => waiting() === before + 1);
    await appendEvents(log(), ws.workspaceId, tickets(1));
    await new Promise((r) => setTimeout(r, 50));
    expect(waiting()).to.equal(before + 1, 'a non-matching event keeps it waiting');
    const [status] = await appendEvents(log(), ws.workspaceId, [operatorStatus('u7')]);
    const reply = await pending;
    expect(reply.body.items.map((i: { id: string }) => i.id)).to.deep.equal([status?.id]);
    expect(waiting()).to.equal(before);
  });

  it('another workspace\'s event does not answer a waiting poll', async () => {
    const other = await svc.createWorkspace();
    const pending = updates('timeout=1');
    await waitUntil(() => waiting() === 1);
    await appendEvents(log(), other.workspaceId, tickets(1));
    const reply = await pending;
    expect(reply.body).to.deep.equal({ items: [], next_offset: 0 });
  });

  it('answers empty with the asked offset at the timeout', async () => {
    const now = svc.service.core.clock();
    const reply = await updates(`offset=${now}&timeout=1`);
    expect(reply.body).to.deep.equal({ items: [], next_offset: now });
    expect(waiting()).to.equal(0);
  });

  it('frees the waiter at once when the client disconnects', async () => {
    const aborted = new AbortController();
    const request = fetch(`${svc.url}/api/v1/updates?timeout=60`, { headers: { authorization: `Bearer ${ws.apiKey}` }, signal: aborted.signal });
    await waitUntil(() => waiting() === 1);
    aborted.abort();
    await request.catch(() => undefined);
    await waitUntil(() => waiting() === 0);
  });

  it('on shutdown answers waiting polls with what they have instead of cutting them off', async () => {
    const now = svc.service.core.clock();
    const pending = [updates(`offset=${now}&timeout=60`), updates(`offset=${now}&timeout=60&types=ticket.closed`)];
    await waitUntil(() => waiting() === 2);
    await svc.service.close();
    for (const reply of await Promise.all(pending)) {
      expect(reply.status).to.equal(200);
      expect(reply.body).to.deep.equal({ items: [], next_offset: now });
    }
  });
});

describe('GET /api/v1/updates and the rate limit', () => {
  it('counts a long poll once however long it waits', async () => {
    // The first request of a key counts against the IP; the next two against the key's limit of 2.
    const svc = await startTestService({ RATE_LIMIT_PER_KEY: '2' });
    try {
      const ws = await svc.createWorkspace();
      expect((await ws.api('GET', '/api/v1/updates?timeout=0')).status).to.equal(200);
      expect((await ws.api('GET', '/api/v1/updates?timeout=1')).status).to.equal(200);
      expect((await ws.api('GET', '/api/v1/updates?timeout=0')).status).to.equal(200);
      const limited = await call(`${svc.url}/api/v1/updates?timeout=0`, 'GET', ws.apiKey);
      expect(limited.status).to.equal(429);
    } finally {
      await svc.close();
    }
  });
});
