// The HTTP server under the koa app: deadlines for slow clients, and an answer in the contract's
// short error form for requests that Node's parser refuses before the app sees them.
import { createServer, type RequestListener, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { randomId } from '../shared/ids.js';

export interface ServerLimits {
  /** A client must have sent all headers of a request within this time. */
  readonly headersTimeoutMs: number;
  /** …and the whole request, body included (a long poll's wait is not part of it). */
  readonly requestTimeoutMs: number;
}

/** An idle keep-alive connection stays open this long (above common proxies' 60 s, so they close first). */
const KEEP_ALIVE_TIMEOUT_MS = 65_000;

/** Node's parser errors and the answer each gets. */
const STATUS_OF: Readonly<Record<string, readonly [number, string]>> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large'],
};

/**
 * A complete HTTP/1.1 answer in the short error form, written straight to the socket; without its
 * body for a HEAD request (its length still said), as HTTP has it: a client would read the body as
 * the start of a next answer.
 */
export const parserRefusal = (code: string | undefined, head = false): string => {
  const [status, reason] = STATUS_OF[code ?? ''] ?? [400, 'Bad Request'];
  const body = JSON.stringify({ detail: `${reason}: the request could not be read as HTTP` });
  return [
    `HTTP/1.1 ${status} ${reason}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    `X-Request-ID: ${randomId()}`,
    'Connection: close',
    '',
    head ? '' : body,
  ].join('\r\n');
};

const onClientError = (error: NodeJS.ErrnoException, socket: Socket): void => {
  // Nothing can be said on a connection that is gone or already answering.
  const answering = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage?.headersSent === true;
  if (error.code === 'ECONNRESET' || !socket.writable || answering) {
    socket.destroy();
    return;
  }
  // The request line is the start of what the parser was reading (the whole request, unless it came in pieces).
  const head = (error as { rawPacket?: Buffer }).rawPacket?.subarray(0, 5).toString('latin1') === 'HEAD ';
  socket.end(parserRefusal(error.code, head));
};

export const createHttpServer = (app: { callback(): RequestListener }, limits: ServerLimits): Server => {
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // How often Node checks those deadlines (its default is 30 s, far coarser than the deadlines).
      connectionsCheckingInterval: Math.max(100, Math.min(5_000, Math.floor(limits.headersTimeoutMs / 4))),
      // The app answers a missing Host itself, in the short form with a request id.
      requireHostHeader: false,
    },
    app.callback(),
  );
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  server.on('clientError', onClientError);
  return server;
};
