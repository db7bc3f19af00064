import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { PROJECTIONS, TICKET_PROJECTIONS } from '../../projections/registry.js';
import { applier, type DocumentStore } from '../../projections/tickets-store.js';
import { memoryDocumentStores } from '../../projections/tickets-store-memory.js';
import type { TicketRow } from '../../projections/tickets.js';
import { ticketView } from '../../src/tickets/views.js';
import { startTestService, type TestService } from '../support/server.js';
import { ticketId, uniqueEmail } from '../support/tickets-fixtures.js';

describe('ticket read models (e2e)', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-tickets-'));
  let test: TestService;
  after(async () => {
    await test.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('are rebuilt from the log: after a restart, and through the registry, the same rows', async () => {
    test = await startTestService({}, { dataDir });
    const ws = await test.createWorkspace();
    const email = uniqueEmail();
    const ids = [await ticketId(ws, { contact: { email }, message: 'one' }), await ticketId(ws, { contact: { email } })];
    await ws.api('POST', `/api/v1/tickets/${ids[0]}/close`);
    await ws.api('POST', `/api/v1/tickets/${ids[1]}/messages`, { content: 'two' });
    await ws.api('POST', `/api/v1/tickets/${ids[1]}/rate`, { rating: 2, comment: 'slow' });
    const before = await ws.api('GET', '/api/v1/tickets');
    const messages = await ws.api('GET', `/api/v1/tickets/${ids[1]}/messages`);

    // Every registered projection, fed the whole log, gives the rows the service answers with.
    const events = await test.service.core.log.readAll({ after: 0 });
    const stores = new Map<string, DocumentStore<unknown>>();
    for (const projection of PROJECTIONS) {
      const store = memoryDocumentStores.open(projection);
      const apply = applier(projection, store);
      for (const event of events.filter((e) => projection.types.includes(e.type))) await apply(event);
      stores.set(projection.name, store);
    }
    const rebuilt = (await stores.get(TICKET_PROJECTIONS.tickets.name)?.dump()) as ReadonlyMap<string, TicketRow>;
    expect(ids.map((id) => ticketView(rebuilt.get(id) as TicketRow))).to.deep.equal([...before.body.items].reverse());
    expect((await stores.get('ticket-messages')?.dump())?.size).to.equal(2);

    await test.close();
    test = await startTestService({}, { dataDir });
    // The restarted server has a new port: call it directly with the same key.
    const reply = await fetch(`${test.url}/api/v1/tickets`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(await reply.json()).to.deep.equal(before.body);
    const replyMessages = await fetch(`${test.url}/api/v1/tickets/${ids[1]}/messages`, { headers: { authorization: `Bearer ${ws.apiKey}` } });
    expect(await replyMessages.json()).to.deep.equal(messages.body);
  });
});
