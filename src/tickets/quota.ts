// Exact monthly ticket counting (domain/ticket/quota.ts) without a read of the whole month per
// ticket. A quota stream holds only ticket.quota_used events, so its last revision gives the count:
// an append with expected revision r is a claim decided on exactly r + 1 tickets, whoever else
// writes the stream. Claims are therefore pipelined: each is decided on the revision that the
// appends already submitted will leave, and appended at once, so the claims of a moment ride the
// same group commit instead of waiting for each other's. A conflict (another API server wrote the
// stream) or a failed append marks the stream stale: once the appends in flight have settled, its
// last revision is asked again and the waiting claims are decided anew. The first claim after a
// start asks it too, without reading the month's counts (a million of them took 4.5 s to read).
// A ticket's creation rides with its count (countAndAppend): both in one commit where the log can
// append to two streams atomically, so a ticket costs one durable commit, not two in a row, and a
// crash leaves both or neither. Each such claim is its own append, submitted in grant order.
// A ticket is counted once: a resumed request finds its ticket's count if its first run made it.
import { WrongExpectedRevision, type AppendResult, type EventLog, type StreamAppend } from '../log/event-log.js';
import type { MicrosClock } from '../log/clock.js';
import type { IdSource } from '../shared/ids.js';
import { grantClaims, monthOf, quotaStream, TICKET_QUOTA_USED } from '../domain/ticket/quota.js';

interface Claim {
  readonly ticketId: string;
  readonly limit: number;
  /** The ticket's own append, committed with its count. */
  readonly ticket?: StreamAppend;
  attempts: number;
  /** `appended`: the ticket's append, when the claim carried one. */
  readonly settle: (granted: boolean, appended?: AppendResult) => void;
  readonly reject: (error: unknown) => void;
}

interface QuotaStream {
  readonly name: string;
  readonly workspaceId: string;
  /** Last revision once every append submitted has landed (-1: no stream); the count is this + 1. */
  revision: number;
  /** The stream's last revision must be asked again before the next decision. */
  stale: boolean;
  reading: boolean;
  inFlight: number;
  waiting: Claim[];
}

const MAX_ATTEMPTS = 50;

export interface TicketQuota {
  /**
   * Counts a ticket against the workspace's month when `limit` allows; false when it is used up.
   * `resumed`: the request runs again under its claim (app/request-claim.ts), and may have counted it.
   */
  claim(workspaceId: string, limit: number, ticketId: string, resumed: boolean): Promise<boolean>;
  /**
   * Counts the ticket and makes `ticket` (its stream's append) in the same commit, or neither: null
   * when the month is used up. On a log without appendAll, counts first, then appends.
   */
  countAndAppend(workspaceId: string, limit: number, ticketId: string, ticket: StreamAppend, resumed: boolean): Promise<AppendResult | null>;
}

export const createTicketQuota = (log: EventLog, clock: MicrosClock, newId: IdSource): TicketQuota => {
  const streams = new Map<string, QuotaStream>();

  /** Commits `claims`' counts (as `write` appends them) from the revision the appends in flight will leave. */
  const commit = (s: QuotaStream, claims: readonly Claim[], write: (counts: StreamAppend) => Promise<readonly (AppendResult | undefined)[]>) => {
    const expected = s.revision;
    s.revision += claims.length;
    s.inFlight += 1;
    const events = claims.map((c) => ({ id: newId(), type: TICKET_QUOTA_USED, workspaceId: s.workspaceId, data: { ticket_id: c.ticketId } }));
    write({ stream: s.name, events, expected: expected < 0 ? 'no_stream' : expected }).then(
      (appended) => {
        s.inFlight -= 1;
        claims.forEach((c, i) => c.settle(true, appended[i]));
        pump(s);
      },
      (error: unknown) => {
        s.inFlight -= 1;
        s.stale = true;
        // Only a conflict on the count is decided again; a ticket's own failure is its caller's.
        const conflict = error instanceof WrongExpectedRevision && error.stream === s.name;
        for (const c of claims) {
          if (conflict && ++c.attempts < MAX_ATTEMPTS) s.waiting.push(c);
          else c.reject(error);
        }
        pump(s);
      },
    );
  };

  /** The count and its ticket in one commit (only claims made where the log has appendAll carry a ticket). */
  const together = async (counts: StreamAppend, ticket: StreamAppend): Promise<AppendResult[]> => {
    if (log.appendAll === undefined) throw new Error('this log cannot append to two streams in one commit');
    return (await log.appendAll([counts, ticket])).slice(1);
  };

  /** Plain counts share one append; a count carrying its ticket is an append of its own. */
  const append = (s: QuotaStream, granted: readonly Claim[]) => {
    const plain = granted.filter((c) => c.ticket === undefined);
    if (plain.length > 0) commit(s, plain, async (counts) => (await log.append(counts.stream, counts.events, counts.expected), []));
    for (const c of granted) {
      const ticket = c.ticket;
      if (ticket !== undefined) commit(s, [c], (counts) => together(counts, ticket));
    }
  };

  const refresh = async (s: QuotaStream) => {
    s.reading = true;
    try {
      s.revision = (await log.lastRevision(s.name)) ?? -1;
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
    else if (s.inFlight === 0) s.waiting.splice(0).forEach((c) => c.settle(false));
  }

  /** A resumed request (app/request-claim.ts) may have counted its ticket before it was interrupted. */
  const countedBefore = async (name: string, ticketId: string, resumed: boolean): Promise<boolean> =>
    resumed && (await log.readStream(name)).some((e) => e.data['ticket_id'] === ticketId);

  const enqueue = (workspaceId: string, claim: Omit<Claim, 'attempts'>): void => {
    const name = quotaStream(workspaceId, monthOf(clock()));
    let s = streams.get(name);
    if (s === undefined) streams.set(name, (s = { name, workspaceId, revision: -1, stale: true, reading: false, inFlight: 0, waiting: [] }));
    s.waiting.push({ ...claim, attempts: 0 });
    pump(s);
  };

  const claim: TicketQuota['claim'] = async (workspaceId, limit, ticketId, resumed) => {
    if (await countedBefore(quotaStream(workspaceId, monthOf(clock())), ticketId, resumed)) return true;
    return new Promise<boolean>((resolve, reject) => enqueue(workspaceId, { ticketId, limit, settle: resolve, reject }));
  };

  return {
    claim,
    async countAndAppend(workspaceId, limit, ticketId, ticket, resumed) {
      const alone = () => log.append(ticket.stream, ticket.events, ticket.expected);
      if (log.appendAll === undefined) return (await claim(workspaceId, limit, ticketId, resumed)) ? alone() : null;
      if (await countedBefore(quotaStream(workspaceId, monthOf(clock())), ticketId, resumed)) return alone();
      return new Promise<AppendResult | null>((resolve, reject) =>
        enqueue(workspaceId, { ticketId, limit, ticket, settle: (granted, appended) => resolve(granted ? (appended as AppendResult) : null), reject }),
      );
    },
  };
};
