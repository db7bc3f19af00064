// The public event catalogue's names (spec "Events"). Everything else in the log is internal and
// never reaches /updates, webhooks or exports.
export const PUBLIC_EVENT_TYPES = [
  'ticket.created',
  'ticket.updated',
  'ticket.assigned',
  'ticket.transferred',
  'ticket.force_taken',
  'ticket.closed',
  'ticket.reopened',
  'ticket.rated',
  'message.created',
  'message.edited',
  'message.reaction.added',
  'message.reaction.removed',
  'contact.created',
  'contact.identified',
  'visitor.reply_waiting',
  'operator.status.changed',
  'billing.payment_received',
  'billing.payment_failed',
  'billing.plan_renewed',
  'billing.plan_changed',
  'billing.plan_downgraded',
  'billing.balance_low',
  'billing.subscription_expired',
] as const;

export type PublicEventType = (typeof PUBLIC_EVENT_TYPES)[number];

const publicTypes: ReadonlySet<string> = new Set(PUBLIC_EVENT_TYPES);

export const isPublicEventType = (type: string): type is PublicEventType => publicTypes.has(type);
