// What the clients did: every write they sent, with what its answer (or its absence) says. The
// checks hold the service to it: an acknowledged write must be there once, an unknown one at most
// once, a refused one not at all.
export interface Workspace {
  readonly name: string;
  readonly id: string;
  readonly apiKey: string;
}

export type WriteKind = 'ticket' | 'message' | 'inbound' | 'contact' | 'identify' | 'patch' | 'close' | 'reopen' | 'rate';

/**
 * `pending`: no answer yet (or a keyed retry still running); `answer_lost`: a keyed retry was told the
 * first request was carried out but its answer lost in a restart (409 idempotent_answer_lost).
 */
export type Outcome = 'pending' | 'acked' | 'refused' | 'unknown' | 'answer_lost';

export interface Write {
  readonly kind: WriteKind;
  readonly workspace: Workspace;
  /** Unique text the write carries (subject, content or email): finds its effect without its id. */
  readonly marker: string;
  /** The ticket the write acts on (for a new ticket: set once acknowledged). */
  ticketId: string | null;
  readonly keyed: boolean;
  outcome: Outcome;
  /** The id its answer returned: the ticket, message or contact. */
  id: string | null;
  /** Date.now() when the deciding answer arrived (any outcome but pending). */
  decidedAt: number | null;
  /** What decided it: a status and error code, or the network failure (for the report). */
  how: string | null;
  /** Already found in the read models by an earlier check. */
  verified: boolean;
}

export interface Ledger {
  readonly writes: Write[];
  /** Keyed requests still being retried; resolves when they have all settled or given up. */
  readonly retrying: Set<Promise<void>>;
  /** Requests answered 422 IDEMPOTENCY_KEY_REUSED although sent again unchanged. */
  readonly anomalies: string[];
}

export const createLedger = (): Ledger => ({ writes: [], retrying: new Set(), anomalies: [] });

export const record = (ledger: Ledger, write: Omit<Write, 'outcome' | 'id' | 'decidedAt' | 'how' | 'verified'>): Write => {
  const entry: Write = { ...write, outcome: 'pending', id: null, decidedAt: null, how: null, verified: false };
  ledger.writes.push(entry);
  return entry;
};
