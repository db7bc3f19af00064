// What the checks found, by kind: each entry says what and where, for the report. Every kind is a
// violation except the counters at the end.
export const VIOLATIONS = {
  lost_writes: 'acknowledged (or "carried out") writes missing from the read models or /updates',
  lost_events: 'events /updates served once and not after a restart',
  lost_deliveries: 'public events never delivered to a subscription that matched them',
  missed_by_long_polls: 'events a long-polling consumer passed over',
  duplicates_created: "writes whose effect is there more than once (a retried request's second ticket, say)",
  phantom_writes: 'effects of writes that were refused, or more of them than were sent',
  offsets_out_of_order: 'offsets that do not strictly increase, repeated event ids, events that appeared behind ones already served',
  deliveries_after_delete: "deliveries that arrived after their subscription's DELETE was answered (plus the grace)",
  bad_deliveries: 'deliveries with a wrong signature or body, an X-Webhook-Id that changed, or an event the subscription did not ask for',
  idempotency_anomalies: 'unchanged keyed retries told IDEMPOTENCY_KEY_REUSED',
} as const;

export type ViolationKind = keyof typeof VIOLATIONS;

/** The kinds that lose something: their sum is the summary's `lost`. */
export const LOSSES: readonly ViolationKind[] = ['lost_writes', 'lost_events', 'lost_deliveries', 'missed_by_long_polls'];

/** Per kind: what it concerns (a write's marker, an event id, ...) → what was found first. A check that runs after each restart finds the same thing again: it counts once. */
export type Findings = Record<ViolationKind, Map<string, string>>;

export const createFindings = (): Findings => Object.fromEntries(Object.keys(VIOLATIONS).map((k) => [k, new Map()])) as unknown as Findings;

export const note = (f: Findings, kind: ViolationKind, subject: string, detail: string): void => {
  if (!f[kind].has(subject)) f[kind].set(subject, detail);
};

export const violationCount = (f: Findings): number => Object.values(f).reduce((n, found) => n + found.size, 0);
