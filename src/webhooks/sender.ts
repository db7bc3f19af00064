// Sends one webhook attempt: POST of the exact envelope bytes with the signature headers, through a
// keep-alive pool whose sockets only reach addresses the SSRF guard allows. A 2xx status within the
// deadline is a delivery; 3xx (redirects are never followed), any other status, a timeout, a reset or
// any network error is a failure with a readable `error`. The response body is read up to a cap and
// discarded, so connections can be reused and a huge answer costs nothing.
import { Agent, type Dispatcher } from 'undici';
import { systemMicros, type MicrosClock } from '../log/clock.js';
import { createAddressGuard, guardedConnector } from './address-guard.js';
import { signatureHeaders, type SigningSecrets } from './signature.js';

export interface DeliveryRequest {
  readonly url: string;
  /** The exact serialized envelope bytes: signed and sent as they are. */
  readonly body: Buffer;
  readonly eventType: string;
  readonly deliveryId: string;
  readonly attempt: number;
  /** Chosen among at send time: a rotation's grace period may end between two attempts. */
  readonly secrets: SigningSecrets;
  /**
   * Asked just before the request is written to its connection (after queueing and connecting, which
   * take time): false cancels it unsent, as a subscription deleted meanwhile needs.
   */
  readonly wanted?: () => boolean;
}

export interface AttemptOutcome {
  readonly delivered: boolean;
  readonly statusCode: number | null;
  readonly error: string | null;
  /** Milliseconds from sending to the status line (or to the failure). */
  readonly latencyMs: number;
}

export interface Sender {
  /**
   * `onStart` is given, at once, a function that cancels the attempt: what is not written to the
   * connection yet is never sent, and the attempt ends as a failure (a deleted subscription's).
   */
  send(request: DeliveryRequest, onStart?: (cancel: () => void) => void): Promise<AttemptOutcome>;
  /** Waits for attempts in flight (each bounded by the deadline), then closes the pool. */
  close(): Promise<void>;
}

export interface SenderOptions {
  readonly timeoutMs: number;
  /** CIDR blocks that open otherwise refused internal addresses. */
  readonly allowedNetworks: readonly string[];
  readonly maxResponseBytes?: number;
  /** Sockets per origin; unlimited when omitted. */
  readonly maxConnections?: number;
  /** The send time each attempt signs as webhook-timestamp and picks its secrets by; the system's when omitted. */
  readonly clock?: MicrosClock;
}

const USER_AGENT = 'support-platform-webhooks/1';
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/**
 * The contract's headers, then the Standard Webhooks ones: webhook-id is the delivery id (the same in
 * every retry, as the standard's idempotency key), webhook-timestamp this attempt's send time.
 */
export const deliveryHeaders = (req: DeliveryRequest, sentAtMicros: number): Record<string, string> => {
  const signatures = signatureHeaders(req.secrets, req.deliveryId, sentAtMicros, req.body);
  return {
    'content-type': 'application/json',
    'user-agent': USER_AGENT,
    'x-webhook-signature': signatures.contract,
    'x-webhook-event': req.eventType,
    'x-webhook-id': req.deliveryId,
    'x-webhook-attempt': String(req.attempt),
    'webhook-id': req.deliveryId,
    'webhook-timestamp': String(Math.floor(sentAtMicros / 1_000_000)),
    'webhook-signature': signatures.standard,
  };
};

const NETWORK_ERRORS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset by the receiver',
  EPIPE: 'connection reset by the receiver',
  UND_ERR_SOCKET: 'connection closed by the receiver before a response',
  UND_ERR_CLOSED: 'connection closed by the receiver before a response',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'DNS lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connect timeout',
  UND_ERR_CONNECT_TIMEOUT: 'connect timeout',
  HPE_INVALID_CONSTANT: 'invalid HTTP response',
  UND_ERR_INFO: 'invalid HTTP response',
};

const codeOf = (error: unknown): string | undefined => {
  const { code, cause } = (error ?? {}) as { code?: unknown; cause?: unknown };
  return typeof code === 'string' ? code : cause === undefined ? undefined : codeOf(cause);
};

const describe = (error: unknown): string => {
  const code = codeOf(error);
  if (code === 'EADDRBLOCKED') return `blocked address: ${(error as Error).message}`;
  const known = code === undefined ? undefined : NETWORK_ERRORS[code];
  if (known !== undefined) return `${known} (${code})`;
  if (code !== undefined && /CERT|TLS|SSL/.test(code)) return `TLS error (${code})`;
  return `network error: ${error instanceof Error ? error.message : String(error)}`;
};

const failureForStatus = (status: number): string | null => {
  if (status >= 200 && status < 300) return null;
  if (status >= 300 && status < 400) return `HTTP ${status}: redirects are not followed`;
  return `HTTP ${status}`;
};

const CANCELLED = 'cancelled: the subscription was deleted';

/** Registration takes any string (spec rule 3): what is not an absolute http(s) URL fails here, before any network use. */
const INVALID_URL = 'invalid url: must be an absolute http or https URL';

/** The origin and path to POST to, or null when the URL is not an absolute http(s) URL (as WHATWG URL parses it). */
const target = (raw: string): { readonly origin: string; readonly path: string } | null => {
  if (!URL.canParse(raw)) return null;
  const url = new URL(raw);
  return url.protocol === 'http:' || url.protocol === 'https:' ? { origin: url.origin, path: `${url.pathname}${url.search}` } : null;
};

export const createSender = (options: SenderOptions): Sender => {
  const cap = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const clock = options.clock ?? systemMicros;
  const agent = new Agent({
    connect: guardedConnector(createAddressGuard(options.allowedNetworks), { timeout: options.timeoutMs }),
    connections: options.maxConnections ?? null,
  });

  return {
    // Through the pool's own dispatch rather than `request`: no AbortSignal, listener or body stream
    // per attempt, which cost more CPU than the HTTP exchange itself.
    send: (req, onStart) =>
      new Promise<AttemptOutcome>((resolve) => {
        const started = performance.now();
        const elapsed = () => Math.round(performance.now() - started);
        const to = target(req.url);
        if (to === null) return resolve({ delivered: false, statusCode: null, error: INVALID_URL, latencyMs: 0 });
        let controller: Dispatcher.DispatchController | null = null;
        let statusCode: number | null = null;
        let latencyMs = 0;
        let read = 0;
        let done = false;
        const finish = (outcome: AttemptOutcome): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          resolve(outcome);
        };
        /** Once the status line is in, it decides; the body is only read (up to the cap) so the connection can be reused. */
        const byStatus = (status: number): void => {
          const error = failureForStatus(status);
          finish({ delivered: error === null, statusCode: status, error, latencyMs });
        };
        /** When the request was written to its connection (undici calls onRequestStart just before). */
        let sentAt: number | null = null;
        // One deadline for the whole attempt: connect, send, status line, and the capped body read. It
        // measures the receiver, not this process: a busy event loop fires it late, with the answer
        // perhaps unread in the socket, or writes the request late. So it judges after one I/O turn
        // (setImmediate runs after the poll phase), and a request written less than the deadline ago
        // gets the rest of its time.
        const judge = (): void => {
          if (done) return;
          const sinceSent = sentAt === null ? Infinity : performance.now() - sentAt;
          if (statusCode === null && sinceSent < options.timeoutMs) {
            timer = setTimeout(deadline, options.timeoutMs - sinceSent);
            return;
          }
          if (statusCode === null) finish({ delivered: false, statusCode: null, error: `timeout: no response within ${options.timeoutMs} ms`, latencyMs: elapsed() });
          else byStatus(statusCode);
          controller?.abort(new Error('deadline'));
        };
        const deadline = (): void => void setImmediate(judge);
        let timer = setTimeout(deadline, options.timeoutMs);
        /** Ends the attempt as cancelled; what is not written to the connection yet is never sent. */
        const cancel = (c: Dispatcher.DispatchController | null): void => {
          finish({ delivered: false, statusCode, error: CANCELLED, latencyMs: elapsed() });
          c?.abort(new Error('cancelled'));
        };
        onStart?.(() => cancel(controller));
        agent.dispatch(
          { origin: to.origin, path: to.path, method: 'POST', headers: deliveryHeaders(req, clock()), body: req.body },
          {
            onRequestStart(c) {
              controller = c;
              sentAt = performance.now();
              if (done) c.abort(new Error('deadline')); // the deadline passed while queued for a connection
              else if (req.wanted?.() === false) cancel(c);
            },
            onResponseStart(_c, status) {
              statusCode = status;
              latencyMs = elapsed();
            },
            onResponseData(c, chunk) {
              read += chunk.length;
              // Past the cap: dropping the connection is cheaper than reading the rest.
              if (read > cap && statusCode !== null) {
                byStatus(statusCode);
                c.abort(new Error('response body over the cap'));
              }
            },
            onResponseEnd() {
              if (statusCode !== null) byStatus(statusCode);
            },
            // After an abort of ours the outcome is already settled, and this changes nothing.
            onResponseError(_c, error) {
              if (statusCode !== null) byStatus(statusCode);
              else finish({ delivered: false, statusCode: null, error: describe(error), latencyMs: elapsed() });
            },
          },
        );
      }),
    close: () => agent.close(),
  };
};
