// The clients' traffic: each client works its own tickets in one workspace (so its ledger knows the
// order of the writes on them) with a mix of writes, half of the POSTs carrying an Idempotency-Key,
// and a read now and then. It runs through crashes: a refused connection is a write that never was.
import { uniqueEmail } from '../../test/support/tickets-fixtures.js';
import { send, type RequestSpec } from './http.js';
import { record, type Ledger, type Workspace, type WriteKind } from './ledger.js';
import type { Random } from './random.js';
import { ADMIN_TOKEN } from './service.js';
import type { Writer } from './writer.js';

interface OwnTicket {
  readonly id: string;
  ops: number;
}

/** A ticket takes this many writes, then its client opens another (its messages stay on one page). */
const OPS_PER_TICKET = 15;
const PAUSE_AFTER_FAILURE_MS = 25;
const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
const PATCH_STATUSES = ['open', 'in_progress', 'pending', 'resolved'] as const;

export interface ClientContext {
  readonly name: string;
  readonly workspace: Workspace;
  readonly ledger: Ledger;
  readonly writer: Writer;
  readonly random: Random;
  readonly baseUrl: () => string;
  readonly stopped: () => boolean;
}

export const runClient = async (c: ClientContext): Promise<void> => {
  const tickets: OwnTicket[] = [];
  const emails: string[] = [];
  let seq = 0;

  /** Records the write and sends it, keyed half of the time when it is a POST. */
  const write = (kind: WriteKind, ticketId: string | null, spec: (marker: string) => Omit<RequestSpec, 'key' | 'token'> & { token?: string }) => {
    const marker = `${c.name}-${kind}-${++seq}`;
    const request = spec(marker);
    const keyed = request.method === 'POST' && c.random.chance(0.5);
    const entry = record(c.ledger, { kind, workspace: c.workspace, marker, ticketId, keyed });
    return c.writer.write(entry, { token: c.workspace.apiKey, ...request, ...(keyed ? { key: marker } : {}) });
  };

  const openTicket = async () => {
    const email = emails.length > 0 && c.random.chance(0.3) ? c.random.pick(emails) : uniqueEmail();
    const answer = await write('ticket', null, (marker) => ({
      method: 'POST',
      path: '/api/v1/tickets',
      body: { subject: marker, priority: c.random.pick(PRIORITIES), contact: { email }, ...(c.random.chance(0.5) ? { message: `${marker}-first` } : {}) },
    }));
    if (answer === null) return false;
    tickets.push({ id: String(answer.body.id), ops: 0 });
    emails.push(email);
    return true;
  };

  const onTicket = (t: OwnTicket) => {
    const path = `/api/v1/tickets/${t.id}`;
    return c.random.pick([
      () => write('message', t.id, (marker) => ({ method: 'POST', path: `${path}/messages`, body: { content: marker } })),
      () => write('message', t.id, (marker) => ({ method: 'POST', path: `${path}/messages`, body: { content: marker } })),
      () => write('inbound', t.id, (marker) => ({ method: 'POST', path: '/api/v1/messages', body: { content: marker, ticket_id: t.id } })),
      () =>
        write('patch', t.id, (marker) => ({
          method: 'PATCH',
          path,
          body: { subject: marker, priority: c.random.pick(PRIORITIES), ...(c.random.chance(0.3) ? { status: c.random.pick(PATCH_STATUSES) } : {}) },
        })),
      () => write('close', t.id, () => ({ method: 'POST', path: `${path}/close` })),
      () => write('reopen', t.id, () => ({ method: 'POST', path: `${path}/reopen` })),
      () => write('rate', t.id, (marker) => ({ method: 'POST', path: `${path}/rate`, body: { rating: c.random.int(1, 5), comment: marker } })),
      async () => (await send(c.baseUrl(), { method: 'GET', path, token: c.workspace.apiKey })).kind === 'answer',
    ]);
  };

  const contact = () =>
    c.random.chance(0.7)
      ? write('contact', null, (marker) => ({ method: 'POST', path: '/api/v1/contacts', body: { email: uniqueEmail(), full_name: marker } }))
      : // The widget's identify: the public contact.created and contact.identified.
        write('identify', null, (marker) => ({
          method: 'POST',
          path: `/internal/v1/workspaces/${c.workspace.id}/contacts/identify`,
          token: ADMIN_TOKEN,
          body: { email: uniqueEmail(), full_name: marker },
        }));

  while (!c.stopped()) {
    let done: unknown;
    if (tickets.length === 0 || c.random.chance(0.2)) done = await openTicket();
    else if (c.random.chance(0.1)) done = await contact();
    else {
      const t = c.random.pick(tickets);
      done = await onTicket(t)();
      if (++t.ops >= OPS_PER_TICKET) tickets.splice(tickets.indexOf(t), 1);
    }
    if (done === null || done === false) await new Promise((resolve) => setTimeout(resolve, PAUSE_AFTER_FAILURE_MS));
  }
};
