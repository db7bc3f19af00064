// Exact monthly ticket counting (domain/ticket/quota.ts) without a read of the whole month per
// ticket. A quota stream holds only ticket.quota_used events, so its last revision gives the count:
// an append with expected revision r is a claim decided on exactly r + 1 tickets, whoever else
// writes the stream. Claims are therefore pipelined: each is decided on the revision that the
// appends already submitted will leave, and appended at once, so the claims of a moment ride the
// same group commit instead of waiting for each other's. A conflict (another API server wrote the
// stream) or a failed append marks the stream stale: once the appends in flight have settled, it
// is read again from the last revision known and the waiting claims are decided anew.
// A ticket is counted once: a resumed request finds its ticket's count if its first run made it.
import { currentClaim } from '../app/request-claim.js';
import { WrongExpectedRevision, type EventLog } from '../log/event-log.js';
import type { MicrosClock } from '../log/clock.js';
import type { IdSource } from '../shared/ids.js';
import { grantClaims, monthOf, quotaStream, TICKET_QUOTA_USED } from '../domain/ticket/quota.js';

interface Claim {
  readonly ticketId: string;
  readonly limit: number;
  attempts: number;
  readonly resolve: (granted: boolean) => void;
  readonly reject: (error: unknown) => void;
}

interface QuotaStream {
  readonly name: string;
  readonly workspaceId: string;
  /** Last revision once every append submitted has landed (-1: no stream); the count is this + 1. */
  revision: number;
  /** Last revision known to be in the log. */
  known: number;
  /** The stream must be read again before the next decision. */
  stale: boolean;
  reading: boolean;
  inFlight: number;
  waiting: Claim[];
}

const MAX_ATTEMPTS = 50;

export interface TicketQuota {
  /** Counts a ticket against the workspace's month when `limit` allows; false when it is used up. */
  claim(workspaceId: string, limit: number, ticketId: string): Promise<boolean>;
}

export const createTicketQuota = (log: EventLog, clock: MicrosClock, newId: IdSource): TicketQuota => {
  const streams = new Map<string, QuotaStream>();

  const append = (s: QuotaStream, granted: readonly Claim[]) => {
    const expected = s.revision;
    s.revision += granted.length;
    s.inFlight += 1;
    const events = granted.map((c) => ({ id: newId(), type: TICKET_QUOTA_USED, workspaceId: s.workspaceId, data: { ticket_id: c.ticketId } }));
    log.append(s.name, events, expected < 0 ? 'no_stream' : expected).then(
      ({ nextRevision }) => {
        s.inFlight -= 1;
        s.known = Math.max(s.known, nextRevision);
        granted.forEach((c) => c.resolve(true));
        pump(s);
      },
      (error: unknown) => {
        s.inFlight -= 1;
        s.stale = true;
        for (const c of granted) {
          if (error instanceof WrongExpectedRevision && ++c.attempts < MAX_ATTEMPTS) s.waiting.push(c);
          else c.reject(error);
        }
        pump(s);
      },
    );
  };

  const refresh = async (s: QuotaStream) => {
    s.reading = true;
    try {
      const events = await log.readStream(s.name, s.known + 1);
      s.known = s.revision = events.at(-1)?.revision ?? s.known;
      s.stale = false;
    } catch (error) {
      s.waiting.splice(0).forEach((c) => c.reject(error));
    } finally {
      s.reading = false;
    }
    pump(s);
  };

  function pump(s: QuotaStream): void {
    if (s.stale) {
      if (s.inFlight === 0 && !s.reading) void refresh(s);
      return;
    }
    if (s.waiting.length === 0) return;
    // Each claim is checked against its own limit (a plan change can land between requests).
    const grants = grantClaims(s.revision + 1, s.waiting.map((c) => c.limit));
    const granted = s.waiting.filter((_, i) => grants[i]);
    // A refusal counts only what is in the log: it waits for the appends in flight.
    s.waiting = s.waiting.filter((_, i) => !grants[i]);
    if (granted.length > 0) append(s, granted);
    else if (s.inFlight === 0) s.waiting.splice(0).forEach((c) => c.resolve(false));
  }

  return {
    async claim(workspaceId, limit, ticketId) {
      const name = quotaStream(workspaceId, monthOf(clock()));
      // A resumed request (app/request-claim.ts) may have counted its ticket before it was interrupted.
      if (currentClaim()?.resumed === true && (await log.readStream(name)).some((e) => e.data['ticket_id'] === ticketId)) return true;
      let s = streams.get(name);
      if (s === undefined) streams.set(name, (s = { name, workspaceId, revision: -1, known: -1, stale: true, reading: false, inFlight: 0, waiting: [] }));
      const stream = s;
      return new Promise<boolean>((resolve, reject) => {
        stream.waiting.push({ ticketId, limit, attempts: 0, resolve, reject });
        pump(stream);
      });
    },
  };
};
