// Sends a write as a careful client does and settles its ledger entry. Without an Idempotency-Key a
// write whose answer is lost is not sent again: its outcome stays unknown. With one, it is sent again
// with the same key until an answer decides it (in the background: a claim the crash left behind
// answers 409 "in progress" until its lease runs out), or until the run stops retrying.
import { send, type Answer, type RequestSpec, type Sent } from './http.js';
import type { Ledger, Outcome, Write } from './ledger.js';

const RETRY_EVERY_MS = 500;

export type Decided = Exclude<Outcome, 'pending'>;
type Verdict = Decided | 'retry';

const isConflictInProgress = (answer: Answer) => answer.status === 409 && answer.body?.error_code === 'CONFLICT' && answer.headers.get('retry-after') !== null;

/** `retryable`: the request may be sent again unchanged (an Idempotency-Key, or a DELETE). */
const verdictOf = (sent: Sent, retryable: boolean): Verdict => {
  if (sent.kind === 'unreached') return retryable ? 'retry' : 'refused';
  if (sent.kind === 'unknown') return retryable ? 'retry' : 'unknown';
  const { answer } = sent;
  if (answer.status >= 200 && answer.status < 300) return 'acked';
  if (answer.status === 409 && answer.body?.detail?.reason === 'idempotent_answer_lost') return 'answer_lost';
  if (retryable && (answer.status >= 500 || answer.status === 429 || isConflictInProgress(answer))) return 'retry';
  // README: a 503 wrote nothing; a 500 may have.
  return answer.status >= 500 && answer.status !== 503 ? 'unknown' : 'refused';
};

const isKeyReused = (sent: Sent) => sent.kind === 'answer' && sent.answer.status === 422 && sent.answer.body?.error_code === 'IDEMPOTENCY_KEY_REUSED';

export interface Decision {
  readonly outcome: Decided;
  /** The deciding answer (null when none came). */
  readonly answer: Answer | null;
  readonly keyReused: boolean;
  /** What decided it, for the report. */
  readonly how: string;
}

const describe = (sent: Sent): string =>
  sent.kind === 'answer' ? `${sent.answer.status} ${sent.answer.body?.error_code ?? ''}`.trim() : sent.kind === 'unreached' ? 'connection refused' : sent.error;

/** Each try of a request: the server, what came back and how long it took (a report's evidence). */
export type Tries = string[];

/** `send`, noting the try in `tries` when given. */
const sendNoted = async (url: string, spec: RequestSpec, tries?: Tries): Promise<Sent> => {
  const began = Date.now();
  const sent = await send(url, spec);
  tries?.push(`${new URL(url).port}: ${describe(sent)} after ${Date.now() - began} ms`);
  return sent;
};

/** Sends `spec` until an answer decides it, while `keepGoing()`; an undecided request is unknown. */
export const decide = async (baseUrl: () => string, spec: RequestSpec, keepGoing: () => boolean, first?: Sent, tries?: Tries): Promise<Decision> => {
  let sent = first ?? (await sendNoted(baseUrl(), spec, tries));
  for (;;) {
    const verdict = verdictOf(sent, true);
    if (verdict !== 'retry') return { outcome: verdict, answer: sent.kind === 'answer' ? sent.answer : null, keyReused: isKeyReused(sent), how: describe(sent) };
    if (!keepGoing()) return { outcome: 'unknown', answer: null, keyReused: false, how: `gave up after ${describe(sent)}` };
    await new Promise((resolve) => setTimeout(resolve, RETRY_EVERY_MS));
    sent = await sendNoted(baseUrl(), spec, tries);
  }
};

/** The id an acknowledging answer names: the ticket, message or contact the write made. */
const idOf = (write: Write, answer: Answer): string | null =>
  ['ticket', 'message', 'inbound', 'contact', 'identify'].includes(write.kind) ? String(answer.body.id) : null;

export interface Writer {
  /** Resolves with the answer once the first request is acknowledged; null otherwise (a keyed retry may still acknowledge it later). */
  write(entry: Write, spec: RequestSpec): Promise<Answer | null>;
  /** Keyed retries still running give up: their writes stay unknown. */
  stopRetrying(): void;
}

export const createWriter = (ledger: Ledger, baseUrl: () => string): Writer => {
  let retrying = true;

  const settle = (entry: Write, outcome: Decided, answer: Answer | null, how: string): void => {
    entry.outcome = outcome;
    entry.decidedAt = Date.now();
    entry.how = how;
    if (outcome !== 'acked' || answer === null) return;
    entry.id = idOf(entry, answer);
    if (entry.kind === 'ticket') entry.ticketId = entry.id;
  };

  return {
    async write(entry, spec) {
      const sent = await send(baseUrl(), spec);
      const keyed = spec.key !== undefined;
      const verdict = verdictOf(sent, keyed);
      if (verdict !== 'retry') {
        const answer = sent.kind === 'answer' ? sent.answer : null;
        settle(entry, verdict, answer, describe(sent));
        return verdict === 'acked' ? answer : null;
      }
      const retry = decide(baseUrl, spec, () => retrying, sent).then((decision) => {
        if (decision.keyReused) ledger.anomalies.push(`${entry.kind} ${entry.marker}: its unchanged retry was told IDEMPOTENCY_KEY_REUSED`);
        settle(entry, decision.outcome, decision.answer, decision.how);
      });
      ledger.retrying.add(retry);
      void retry.finally(() => ledger.retrying.delete(retry));
      return null;
    },
    stopRetrying() {
      retrying = false;
    },
  };
};
