// Exact monthly ticket counting (domain/ticket/quota.ts) without a read of the whole month per
// ticket: the count and revision of each quota stream are cached and caught up incrementally, and
// claims waiting on the same stream are decided and appended together (they then ride one group
// commit instead of queueing behind each other). Another writer (a second API server) only costs a
// re-read on the WrongExpectedRevision retry.
import { WrongExpectedRevision, type EventLog, type ExpectedRevision } from '../log/event-log.js';
import type { MicrosClock } from '../log/clock.js';
import type { IdSource } from '../shared/ids.js';
import { grantClaims, monthOf, quotaStream, TICKET_QUOTA_USED } from '../domain/ticket/quota.js';

interface Claim {
  readonly ticketId: string;
  readonly limit: number;
  readonly resolve: (granted: boolean) => void;
  readonly reject: (error: unknown) => void;
}

interface QuotaStream {
  revision: ExpectedRevision;
  used: number;
  pending: Claim[];
  running: boolean;
}

const MAX_ATTEMPTS = 50;

export interface TicketQuota {
  /** Counts a ticket against the workspace's month when `limit` allows; false when it is used up. */
  claim(workspaceId: string, limit: number, ticketId: string): Promise<boolean>;
}

export const createTicketQuota = (log: EventLog, clock: MicrosClock, newId: IdSource): TicketQuota => {
  const streams = new Map<string, QuotaStream>();

  const catchUp = async (name: string, s: QuotaStream) => {
    const events = await log.readStream(name, s.revision === 'no_stream' ? 0 : Number(s.revision) + 1);
    s.used += events.filter((e) => e.type === TICKET_QUOTA_USED).length;
    const last = events.at(-1);
    if (last !== undefined) s.revision = last.revision;
  };

  const decideBatch = async (name: string, workspaceId: string, s: QuotaStream, batch: readonly Claim[]) => {
    for (let attempt = 1; ; attempt++) {
      await catchUp(name, s);
      // Each claim is checked against its own limit (a plan change can land between requests).
      const grants = grantClaims(s.used, batch.map((c) => c.limit));
      const granted = batch.filter((_, i) => grants[i]);
      if (granted.length === 0) return batch.forEach((c) => c.resolve(false));
      try {
        const events = granted.map((c) => ({ id: newId(), type: TICKET_QUOTA_USED, workspaceId, data: { ticket_id: c.ticketId } }));
        const { nextRevision } = await log.append(name, events, s.revision);
        s.revision = nextRevision;
        s.used += granted.length;
        return batch.forEach((c, i) => c.resolve(grants[i] === true));
      } catch (error) {
        if (!(error instanceof WrongExpectedRevision) || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  };

  const drain = async (name: string, workspaceId: string, s: QuotaStream) => {
    s.running = true;
    while (s.pending.length > 0) {
      const batch = s.pending.splice(0);
      await decideBatch(name, workspaceId, s, batch).catch((error: unknown) => batch.forEach((c) => c.reject(error)));
    }
    s.running = false;
  };

  return {
    claim(workspaceId, limit, ticketId) {
      const name = quotaStream(workspaceId, monthOf(clock()));
      let s = streams.get(name);
      if (s === undefined) streams.set(name, (s = { revision: 'no_stream', used: 0, pending: [], running: false }));
      const stream = s;
      return new Promise<boolean>((resolve, reject) => {
        stream.pending.push({ ticketId, limit, resolve, reject });
        if (!stream.running) void drain(name, workspaceId, stream);
      });
    },
  };
};
