// Support traffic as it happens: conversations that run start to end, one request after the other.
//   widget visitor: identified by the widget (contact.created, contact.identified), writes in, an
//     operator takes the ticket and answers while the visitor is away (visitor.reply_waiting: the
//     workspaces have visitor notifications on, see ./main.ts, and it is a new visitor each time,
//     since it is sent at most once per 5 minutes per visitor), the visitor reacts,
//     writes again, the operator fixes a typo, close, rating, sometimes a reopen;
//   email or Telegram contact: writes in (POST /messages opens the ticket), the bot answers, the ticket
//     is triaged (PATCH), assigned, transferred to a department, force-taken, gets internal notes (with
//     a screenshot now and then), waits on the contact, is resolved, reopened, closed;
//   operator presence: an operator switches status.
// With `all` every optional step is taken: the tour of the printed workspace, which so causes every
// ticket, message, contact, visitor and operator event of the catalogue within its first second.
// Refusals provoked on purpose (editing a system message, closing a closed ticket) are counted apart.
import { randomUUID } from 'node:crypto';
import type { Random } from '../torture/random.js';
import { Abandon, attempt, only, routesOf, type Routes, type Sim, type SimWorkspace } from './client.js';

interface Flow {
  readonly sim: Sim;
  readonly ws: SimWorkspace;
  readonly r: Random;
  readonly routes: Routes;
  /** Take every optional step. */
  readonly all: boolean;
}

const OPERATORS = [
  { id: 'op-anna', name: 'Anna Kovacs' },
  { id: 'op-ben', name: 'Ben Okafor' },
  { id: 'op-chen', name: 'Chen Wei' },
  { id: 'op-dina', name: 'Dina Haddad' },
  { id: 'op-emil', name: 'Emil Larsen' },
];
const DEPARTMENTS = [
  { id: 'dept-billing', name: 'Billing' },
  { id: 'dept-tech', name: 'Technical support' },
  { id: 'dept-sales', name: 'Sales' },
];
const NAMES = ['Maria Garcia', 'John Smith', 'Aiko Tanaka', 'Olu Adeyemi', 'Lena Fischer', 'Ravi Patel', null];
const SUBJECTS = ['Cannot log in', 'Refund for order', 'Invoice question', 'App crashes on start', 'Change of address', null];
const FIRST = ['Hello, I cannot log in since this morning.', 'Hi! I was charged twice for my order.', 'Where can I download my invoice?', 'The app closes as soon as I open it.'];
const BOT = ['Thanks for writing in! An operator will answer shortly.', 'We got your message. Average reply time: 5 minutes.'];
const REPLIES = ['Hi! Could you tell me which email you signed up with?', 'Sorry about that, I am looking into it now.', 'I have refunded the second charge; it will show in 3 days.'];
const FOLLOW_UPS = ['It is the same email as this one.', 'Thank you!', 'It works now, thanks a lot.', 'Still the same problem, I am afraid.'];
const NOTES = ['Known issue, see incident #42.', 'Customer since 2021, be nice.', 'Escalated to the payments team.'];
const EMOJIS = ['👍', '❤️', '🙏', '😂'];
const STATUSES = ['online', 'away', 'dnd', 'custom', 'offline'] as const;

/** A 1×1 PNG, the "screenshot" some internal notes carry. */
const PNG = Uint8Array.from(Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64'));

const maybe = (f: Flow, p: number): boolean => f.all || f.r.chance(p);
const uid = () => randomUUID().slice(0, 8);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * New tickets wait while a billing scenario may leave the workspace on the entry plan; one refused
 * there for the monthly limit (403 TICKET_LIMIT_REACHED) was caused on purpose, not an error.
 */
const openingTicket = async (f: Flow): Promise<(key: string) => boolean> => {
  while (f.ws.entryPlanRisk && !f.all) {
    if (f.sim.stopped()) throw new Abandon('stopped');
    await sleep(100);
  }
  return (key) => key === '403 TICKET_LIMIT_REACHED' && f.ws.entryPlanRisk;
};

const operatorSays = (f: Flow, ticketId: string, op: (typeof OPERATORS)[number], content: string, extra: Record<string, unknown> = {}) =>
  f.routes.internal('POST', `/tickets/${ticketId}/messages`, { sender: 'operator', operator_id: op.id, operator_name: op.name, content, ...extra });

/** Closes the ticket; the contact may rate it, in the widget (stars only) or through the API (with a comment). */
const closeAndRate = async (f: Flow, ticketId: string, p: number, inWidget: boolean) => {
  await f.routes.api('POST', `/tickets/${ticketId}/close`);
  if (!maybe(f, p)) return;
  if (inWidget) await f.routes.internal('POST', `/tickets/${ticketId}/rate`, { rating: f.r.int(1, 5) });
  else await f.routes.api('POST', `/tickets/${ticketId}/rate`, { rating: f.r.int(1, 5), comment: f.r.pick(['Quick and helpful', 'Took a while', null]) });
};

export const widgetVisitor = async (f: Flow): Promise<void> => {
  const { api, internal } = f.routes;
  const n = uid();
  const visitor = { email: `visitor-${n}@example.com`, full_name: f.r.pick(NAMES), internal_id: `site-user-${n}` };
  const contact = await internal('POST', '/contacts/identify', visitor);
  if (maybe(f, 0.3)) await internal('POST', '/contacts/identify', { ...visitor, phone: `+1555${f.r.int(1000000, 9999999)}` });
  const intended = await openingTicket(f);
  const ticket = await api('POST', '/tickets', { contact: { email: visitor.email }, subject: f.r.pick(SUBJECTS), message: f.r.pick(FIRST) }, intended);
  if (ticket.id === undefined) return;
  const t = String(ticket.id);
  const op = f.r.pick(OPERATORS);
  await internal('POST', `/tickets/${t}/assign`, { operator_id: op.id, operator_name: op.name, operator_avatar_url: `https://avatars.example.com/${op.id}.png` });
  const reply = await operatorSays(f, t, op, `${f.r.pick(REPLIES)} Thnaks for waiting.`);
  // The visitor has closed the chat: the widget notifies them (at most once per 5 minutes per visitor).
  if (maybe(f, 0.7)) await internal('POST', `/tickets/${t}/reply-waiting`, { message_id: reply.id, operator_name: op.name, locale: f.r.pick(['en', 'de', 'es']), surface: 'widget' });
  if (maybe(f, 0.5)) {
    await internal('POST', `/tickets/${t}/messages/${reply.id}/reactions`, { reactor_kind: 'visitor', reactor_id: contact.id, emoji: f.r.pick(EMOJIS) });
    if (maybe(f, 0.4)) await internal('DELETE', `/tickets/${t}/messages/${reply.id}/reactions/${contact.id}`);
  }
  await api('POST', '/messages', { ticket_id: t, content: f.r.pick(FOLLOW_UPS) });
  if (maybe(f, 0.3)) await internal('PATCH', `/tickets/${t}/messages/${reply.id}`, { content: String(reply.content).replace('Thnaks', 'Thanks') });
  await closeAndRate(f, t, 0.6, true);
  if (maybe(f, 0.2)) {
    await api('POST', `/tickets/${t}/reopen`);
    await api('POST', '/messages', { ticket_id: t, content: 'Sorry, one more question.' });
    await api('POST', `/tickets/${t}/close`);
  }
};

export const emailContact = async (f: Flow): Promise<void> => {
  const { api, internal } = f.routes;
  const contact = f.r.chance(0.7) ? { email: `customer-${uid()}@example.org`, full_name: f.r.pick(NAMES) } : { telegram_id: f.r.int(10_000_000, 999_999_999), full_name: f.r.pick(NAMES) };
  const intended = await openingTicket(f);
  const first = await api('POST', '/messages', { content: f.r.pick(FIRST), contact }, intended);
  if (first.ticket_id === undefined) return;
  const t = String(first.ticket_id);
  await api('POST', `/tickets/${t}/messages`, { content: f.r.pick(BOT) });
  if (maybe(f, 0.5)) await api('PATCH', `/tickets/${t}`, { priority: 'high', subject: `[urgent] ${f.r.pick(SUBJECTS) ?? 'Question'}` });
  let op = f.r.pick(OPERATORS);
  await internal('POST', `/tickets/${t}/assign`, { operator_id: op.id, operator_name: op.name });
  if (maybe(f, 0.4)) {
    const dept = f.r.pick(DEPARTMENTS);
    op = f.r.pick(OPERATORS.filter((o) => o.id !== op.id));
    await internal('POST', `/tickets/${t}/transfer`, { department_id: dept.id, department_name: dept.name, operator_id: op.id, operator_name: op.name });
  }
  if (maybe(f, 0.3)) {
    op = f.r.pick(OPERATORS.filter((o) => o.id !== op.id));
    await internal('POST', `/tickets/${t}/force-take`, { operator_id: op.id });
  }
  if (maybe(f, 0.4)) {
    const media = maybe(f, 0.3) ? [String((await f.routes.upload(`screenshot-${uid()}.png`, 'image/png', PNG)).id)] : [];
    await operatorSays(f, t, op, f.r.pick(NOTES), { is_internal: true, media_ids: media });
  }
  await operatorSays(f, t, op, f.r.pick(REPLIES));
  if (maybe(f, 0.5)) {
    await api('PATCH', `/tickets/${t}`, { status: 'pending' });
    await api('POST', '/messages', { ticket_id: t, content: f.r.pick(FOLLOW_UPS) }); // back to open
  }
  if (maybe(f, 0.15)) {
    const system = await internal('POST', `/tickets/${t}/messages`, { sender: 'system', content: `Ticket assigned to ${op.name}` });
    await internal('PATCH', `/tickets/${t}/messages/${system.id}`, { content: 'edited' }, only('422 VALIDATION_ERROR')); // system messages cannot be edited
  }
  await api('PATCH', `/tickets/${t}`, { status: 'resolved' });
  if (maybe(f, 0.3)) await api('POST', `/tickets/${t}/reopen`);
  await closeAndRate(f, t, 0.4, false);
  if (maybe(f, 0.1)) await api('POST', `/tickets/${t}/close`, undefined, only('409 TICKET_ALREADY_CLOSED')); // a double click
};

export const operatorPresence = async (f: Flow): Promise<void> => {
  const op = f.r.pick(OPERATORS);
  const status = f.all ? 'custom' : f.r.pick(STATUSES);
  const body = status === 'custom' ? { status, status_text: 'In a meeting', status_emoji: '📅' } : { status };
  await f.routes.internal('POST', `/operators/${op.id}/status`, body);
};

const FLOWS: readonly [number, (f: Flow) => Promise<void>][] = [
  [0.4, widgetVisitor],
  [0.45, emailContact],
  [0.15, operatorPresence],
];

const flowOf = (sim: Sim, ws: SimWorkspace, r: Random, all: boolean): Flow => ({ sim, ws, r, routes: routesOf(sim, ws, !all), all });

/** Every optional step of each flow once, unpaced, in the workspace: a widget visitor, an email contact, a status. */
export const ticketTour = async (sim: Sim, ws: SimWorkspace, r: Random): Promise<void> => {
  const f = flowOf(sim, ws, r, true);
  await Promise.all([attempt(() => widgetVisitor(f)), attempt(() => emailContact(f)), attempt(() => operatorPresence(f))]);
};

/** One client of the workspace: conversations one after the other, paced, until the run ends. */
export const runAgent = async (sim: Sim, ws: SimWorkspace, r: Random): Promise<void> => {
  const f = flowOf(sim, ws, r, false);
  while (!sim.stopped()) {
    let roll = r.next();
    const [, flow] = FLOWS.find(([weight]) => (roll -= weight) < 0) ?? (FLOWS[0] as (typeof FLOWS)[number]);
    await attempt(() => flow(f));
  }
};
