// A keyed request interrupted between two of its appends is resumed by its retry: two real API
// servers on one data folder (the shared-log mode); on server A the request's second append never lands (as
// if A were killed there), and once A's claim has expired the retry on server B carries out what A
// did not, keeping what A did, with the ids A minted. A's run, when it comes back, has no say.
import { expect } from 'chai';
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { sign } from '../../src/webhooks/signature.js';
import type { EventLog } from '../../src/log/event-log.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { uniqueEmail } from '../support/tickets-fixtures.js';

const LEASE_MS = 300;

interface Stall {
  /** Resolves when the stalled append was reached. */
  readonly reached: Promise<void>;
  /** Lets the stalled append fail, as the request of a process that comes back to life would. */
  fail(): void;
}

/** Makes the first append to a stream matching `pattern` (alone or among appendAll's parts) hang until `fail()`. */
const stallAppend = (log: EventLog, pattern: RegExp): Stall => {
  let reach = (): void => undefined;
  let fail = (): void => undefined;
  const reached = new Promise<void>((resolve) => (reach = resolve));
  let stalled = false;
  /** The stall for the first call touching a matching stream; null lets the call through. */
  const stall = <T>(streams: readonly string[]): Promise<T> | null => {
    if (stalled || !streams.some((stream) => pattern.test(stream))) return null;
    stalled = true;
    reach();
    return new Promise<T>((_, reject) => (fail = () => reject(new Error('the process died here'))));
  };
  const append = log.append.bind(log);
  log.append = (stream, events, expected) => stall([stream]) ?? append(stream, events, expected);
  const appendAll = log.appendAll?.bind(log);
  if (appendAll !== undefined) log.appendAll = (parts) => stall(parts.map((part) => part.stream)) ?? appendAll(parts);
  return { reached, fail: () => fail() };
};

describe('Idempotency-Key: resuming a request interrupted between two appends (e2e)', function () {
  this.timeout(60_000);
  let a: TestService;
  let b: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;

  before(async () => {
    // API servers share the log (the embedded role holds it alone).
    a = await startTestService({ ROLE: 'api', IDEMPOTENCY_LEASE_MS: String(LEASE_MS) });
    b = await startTestService({ ROLE: 'api' }, { dataDir: a.dataDir });
    ws = await a.createWorkspace('business');
    receiver = await startReceiver();
  });
  after(async () => {
    await Promise.all([b?.close(), a?.close(), receiver?.close()]);
    if (a !== undefined) rmSync(a.dataDir, { recursive: true, force: true });
  });

  const onB = (method: string, path: string, body: unknown, key: string) => call(`${b.url}${path}`, method, ws.apiKey, body, { 'idempotency-key': key });
  const eventsOf = async (type: string, where: (data: Record<string, unknown>) => boolean) =>
    (await b.service.core.log.readAll({ after: 0, types: [type], workspaceId: ws.workspaceId })).filter((e) => where(e.data));

  /** Sends the request to A until it stalls, then waits out A's lease. Gives A's answer still to come. */
  const interruptOnA = async (stall: Stall, path: string, body: unknown, key: string): Promise<{ answer: Promise<Reply> }> => {
    const answer = ws.api('POST', path, body, { 'idempotency-key': key });
    await stall.reached;
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 100));
    return { answer };
  };

  it('creates the ticket of a POST /tickets whose contact was written, once, with the ids the first run minted', async () => {
    const email = uniqueEmail();
    const subject = `Resumed ${randomUUID()}`;
    const body = { contact: { email, full_name: 'Ada' }, subject, message: 'Hello' };
    const stall = stallAppend(a.service.core.log, /^ticket-[0-9a-f]{32}$/);
    const first = await interruptOnA(stall, '/api/v1/tickets', body, 'resume-ticket');
    // A wrote the contact, not the ticket, nor its count (which is committed with the ticket).
    expect(await eventsOf('contact.registered', (d) => d['email'] === email)).to.have.length(1);
    expect(await eventsOf('ticket.created', (d) => d['subject'] === subject)).to.have.length(0);
    expect(await eventsOf('ticket.quota_used', () => true)).to.have.length(0);

    const resumed = await onB('POST', '/api/v1/tickets', body, 'resume-ticket');
    expect(resumed.status, JSON.stringify(resumed.body)).to.equal(201);
    const created = await eventsOf('ticket.created', (d) => d['subject'] === subject);
    expect(created).to.have.length(1);
    expect(created[0]?.data['ticket_id'] ?? resumed.body.id).to.equal(resumed.body.id);
    const contacts = await eventsOf('contact.registered', (d) => d['email'] === email);
    expect(contacts).to.have.length(1);
    expect(resumed.body.contact_id).to.equal(contacts[0]?.data['contact_id']);
    // Counted once against the month, with the ticket.
    expect(await eventsOf('ticket.quota_used', (d) => d['ticket_id'] === resumed.body.id)).to.have.length(1);

    // A's run comes back and fails: its answer is not recorded over B's.
    stall.fail();
    expect((await first.answer).status).to.equal(500);
    const again = await onB('POST', '/api/v1/tickets', body, 'resume-ticket');
    expect(again.status).to.equal(201);
    expect(again.body).to.deep.equal(resumed.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    expect(await eventsOf('ticket.created', (d) => d['subject'] === subject)).to.have.length(1);
  });

  it('creates the subscription of a POST /webhooks whose slot was claimed, and answers the secret it stores', async () => {
    const description = `resumed ${randomUUID()}`;
    const body = { url: receiver.url, events: ['ticket.created'], description };
    const stall = stallAppend(a.service.core.log, /^webhook-[0-9a-f]{32}$/);
    const first = await interruptOnA(stall, '/api/v1/webhooks', body, 'resume-webhook');

    const resumed = await onB('POST', '/api/v1/webhooks', body, 'resume-webhook');
    expect(resumed.status, JSON.stringify(resumed.body)).to.equal(201);
    const listed = (await call(`${b.url}/api/v1/webhooks`, 'GET', ws.apiKey)).body.items as { id: string; description: string }[];
    expect(listed.filter((w) => w.description === description).map((w) => w.id)).to.deep.equal([resumed.body.id]);
    const slots = await b.service.core.log.readStream(`webhook-slots-${ws.workspaceId}`);
    expect(slots.filter((e) => e.data['subscription_id'] === resumed.body.id)).to.have.length(1);

    // The answered secret is the one deliveries are signed with.
    const tested = await call(`${b.url}/api/v1/webhooks/${resumed.body.id}/test`, 'POST', ws.apiKey);
    expect(tested.body.delivered).to.equal(true);
    const [delivery] = await receiver.waitForRequests(1);
    expect(delivery?.headers['x-webhook-signature']).to.equal(sign(String(resumed.body.secret), delivery?.body ?? Buffer.alloc(0)));

    stall.fail();
    expect((await first.answer).status).to.equal(500);
    const again = await onB('POST', '/api/v1/webhooks', body, 'resume-webhook');
    expect(again.body).to.deep.equal(resumed.body);
  });
});
