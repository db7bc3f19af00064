// The monthly ticket quota of a workspace: stream `ticket-quota-<workspace>-<YYYY-MM>` holds one
// internal event per ticket counted and nothing else, so revision r means r + 1 tickets. Appending
// with the expected revision makes the count exact under concurrency.
export const TICKET_QUOTA_USED = 'ticket.quota_used';

export const quotaStream = (workspaceId: string, month: string): string => `ticket-quota-${workspaceId}-${month}`;

/** The UTC calendar month of an instant in microseconds: "2026-11". */
export const monthOf = (micros: number): string => new Date(Math.floor(micros / 1000)).toISOString().slice(0, 7);

/** Which waiting claims, in arrival order and each with its plan's limit, fit when `used` are counted. */
export const grantClaims = (used: number, limits: readonly number[]): boolean[] => {
  let counted = used;
  return limits.map((limit) => counted < limit && ++counted > 0);
};
