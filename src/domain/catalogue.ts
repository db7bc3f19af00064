// The public event catalogue (spec "Events"): each event's `data` as an io-ts codec. Producers build
// data through these types; tests check every emitted event against its codec.
import * as t from 'io-ts';
import type { PublicEventType } from './event-types.js';

const str = t.string;
const nullableStr = t.union([t.string, t.null]);
const num = t.number;

export const TicketStatus = t.keyof({ new: null, open: null, in_progress: null, pending: null, resolved: null, closed: null });
export type TicketStatus = t.TypeOf<typeof TicketStatus>;
export const TicketPriority = t.keyof({ normal: null, high: null });
export type TicketPriority = t.TypeOf<typeof TicketPriority>;
export const SenderType = t.keyof({ contact: null, operator: null, bot: null, ai: null });
export type SenderType = t.TypeOf<typeof SenderType>;
export const OperatorStatus = t.keyof({ online: null, away: null, dnd: null, custom: null, offline: null });
export const BillingTrigger = t.keyof({ auto: null, manual: null });
export const ExpiryReason = t.keyof({ insufficient_balance: null, auto_renew_disabled: null });

const MediaItem = t.intersection([t.type({ url: str }), t.partial({ id: str, file_name: str, content_type: str, size: num })]);
const ContactData = t.type({
  id: str,
  internal_id: nullableStr,
  email: nullableStr,
  full_name: nullableStr,
  phone: nullableStr,
  telegram_id: nullableStr,
});

export const EventData = {
  'ticket.created': t.type({ ticket_id: str, status: TicketStatus, priority: TicketPriority, contact_id: str, subject: nullableStr }),
  // Other fields depend on the source; after PATCH only ticket_id and workspace_id.
  'ticket.updated': t.type({ ticket_id: str }),
  'ticket.assigned': t.type({
    ticket_id: str,
    operator_id: str,
    operator_name: str,
    operator_avatar_url: nullableStr,
    status: TicketStatus,
  }),
  'ticket.transferred': t.type({
    ticket_id: str,
    department_id: str,
    department_name: str,
    operator_id: nullableStr,
    operator_name: nullableStr,
  }),
  'ticket.force_taken': t.type({ ticket_id: str, operator_id: str, previous_operator_id: str }),
  'ticket.closed': t.type({ ticket_id: str, closed_at: str, resolution_secs: num }),
  'ticket.reopened': t.type({ ticket_id: str, status: TicketStatus }),
  'ticket.rated': t.intersection([t.type({ ticket_id: str, rating: num }), t.partial({ comment: nullableStr })]),
  'message.created': t.type({
    id: str,
    message_id: str,
    ticket_id: str,
    sender_type: SenderType,
    sender_id: nullableStr,
    sender_name: nullableStr,
    content: str,
    is_internal: t.boolean,
    media: t.array(MediaItem),
    created_at: str,
  }),
  'message.edited': t.type({ id: str, message_id: str, ticket_id: str, content: str, is_internal: t.boolean, edited_at: str }),
  'message.reaction.added': t.type({ message_id: str, reactor_kind: str, reactor_id: str, emoji: str }),
  'message.reaction.removed': t.type({ message_id: str, reactor_id: str }),
  'contact.created': ContactData,
  'contact.identified': ContactData,
  'visitor.reply_waiting': t.type({
    contact_id: str,
    external_id: nullableStr,
    telegram_user_id: nullableStr,
    ticket_id: str,
    ticket_short_id: str,
    message_id: str,
    operator_name: str,
    preview: str,
    locale: str,
    surface: str,
    open_url: str,
    replied_at: str,
  }),
  'operator.status.changed': t.type({ user_id: str, status: OperatorStatus, status_text: nullableStr, status_emoji: nullableStr }),
  'billing.payment_received': t.type({
    payment_id: str,
    order_id: str,
    amount: num,
    currency: str,
    method: str,
    transaction_id: str,
    new_balance: num,
  }),
  'billing.payment_failed': t.type({ payment_id: str, order_id: str, amount: num, method: str, reason: str }),
  'billing.plan_renewed': t.type({ plan: str, amount: num, new_balance: num, expires_at: str, trigger: BillingTrigger }),
  'billing.plan_changed': t.intersection([
    t.type({ old_plan: str, new_plan: str, expires_at: str }),
    t.partial({ amount: num, new_balance: num, reason: str }),
  ]),
  'billing.plan_downgraded': t.intersection([
    t.type({ old_plan: str, new_plan: str, expires_at: nullableStr }),
    t.partial({ reason: str }),
  ]),
  'billing.balance_low': t.intersection([
    t.type({ plan: str, balance: num, price: num, shortfall: num }),
    t.partial({ trigger: BillingTrigger }),
  ]),
  'billing.subscription_expired': t.type({ old_plan: str, reason: ExpiryReason, expired_at: str }),
} satisfies Record<PublicEventType, t.Mixed>;

export type EventDataOf<T extends PublicEventType> = t.TypeOf<(typeof EventData)[T]>;

/** A public event before it is recorded: a type and its data. */
export type PublicEvent = { [T in PublicEventType]: { readonly type: T; readonly data: EventDataOf<T> } }[PublicEventType];
