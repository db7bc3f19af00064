// Sends one webhook attempt: POST of the exact envelope bytes with the signature headers, through a
// keep-alive pool whose sockets only reach addresses the SSRF guard allows. A 2xx status within the
// deadline is a delivery; 3xx (redirects are never followed), any other status, a timeout, a reset or
// any network error is a failure with a readable `error`. The response body is read up to a cap and
// discarded, so connections can be reused and a huge answer costs nothing.
import { Agent, request } from 'undici';
import { createAddressGuard, guardedConnector } from './address-guard.js';
import { sign } from './signature.js';

export interface DeliveryRequest {
  readonly url: string;
  /** The exact serialized envelope bytes: signed and sent as they are. */
  readonly body: Buffer;
  readonly eventType: string;
  readonly deliveryId: string;
  readonly attempt: number;
  readonly secret: string;
}

export interface AttemptOutcome {
  readonly delivered: boolean;
  readonly statusCode: number | null;
  readonly error: string | null;
  /** Milliseconds from sending to the status line (or to the failure). */
  readonly latencyMs: number;
}

export interface Sender {
  send(request: DeliveryRequest): Promise<AttemptOutcome>;
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
}

const USER_AGENT = 'support-platform-webhooks/1';
const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

export const deliveryHeaders = (req: DeliveryRequest): Record<string, string> => ({
  'content-type': 'application/json',
  'user-agent': USER_AGENT,
  'x-webhook-signature': sign(req.secret, req.body),
  'x-webhook-event': req.eventType,
  'x-webhook-id': req.deliveryId,
  'x-webhook-attempt': String(req.attempt),
});

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

/** Reads at most `cap` bytes, then drops the rest by closing the stream; never throws. */
const discard = async (body: AsyncIterable<Buffer> & { destroy(): unknown }, cap: number): Promise<void> => {
  let read = 0;
  try {
    for await (const chunk of body) {
      read += chunk.length;
      if (read > cap) break; // leaving the loop destroys the stream and its connection
    }
  } catch {
    // The outcome is already decided by the status line; a broken body changes nothing.
  }
};

const checkUrl = (raw: string): string | null => {
  try {
    const { protocol } = new URL(raw);
    return protocol === 'http:' || protocol === 'https:' ? null : `unsupported URL scheme ${protocol}`;
  } catch {
    return 'invalid URL';
  }
};

export const createSender = (options: SenderOptions): Sender => {
  const cap = options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const agent = new Agent({
    connect: guardedConnector(createAddressGuard(options.allowedNetworks), { timeout: options.timeoutMs }),
    connections: options.maxConnections ?? null,
  });

  return {
    async send(req) {
      const started = performance.now();
      const elapsed = () => Math.round(performance.now() - started);
      const refused = checkUrl(req.url);
      if (refused !== null) return { delivered: false, statusCode: null, error: refused, latencyMs: 0 };
      // One deadline for the whole attempt: connect, send, status line, and the capped body read.
      const deadline = new AbortController();
      const timer = setTimeout(() => deadline.abort(), options.timeoutMs);
      try {
        const response = await request(req.url, { dispatcher: agent, method: 'POST', headers: deliveryHeaders(req), body: req.body, signal: deadline.signal });
        const latencyMs = elapsed();
        // Awaited, so the connection is back in the pool before the next attempt needs one.
        await discard(response.body, cap);
        const error = failureForStatus(response.statusCode);
        return { delivered: error === null, statusCode: response.statusCode, error, latencyMs };
      } catch (error) {
        const message = deadline.signal.aborted ? `timeout: no response within ${options.timeoutMs} ms` : describe(error);
        return { delivered: false, statusCode: null, error: message, latencyMs: elapsed() };
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => agent.close(),
  };
};
