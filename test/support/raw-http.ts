// HTTP/1.1 over a bare TCP socket, for tests that must send exactly the bytes they mean (truncated,
// malformed, slow or abandoned requests) and see exactly what the server does with the connection.
import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  /** The status of the first answer, or null when the connection closed without one. */
  readonly status: number | null;
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** Whether the server closed the connection (rather than the test ending the wait). */
  readonly closedByServer: boolean;
  readonly elapsedMs: number;
}

export interface RawOptions {
  /** Bytes to send, in order; a function is awaited between chunks (to stall, or to check something). */
  readonly parts: readonly (Buffer | string | ((socket: Socket) => Promise<void> | void))[];
  /** Give up waiting for an answer after this long (the result then has closedByServer false). */
  readonly waitMs?: number;
  /** Destroy the connection right after the last part: the client walks away mid-request. */
  readonly abandon?: boolean;
}

const parse = (raw: Buffer): { status: number | null; headers: Record<string, string>; body: string; complete: boolean } => {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (end < 0) return { status: null, headers: {}, body: '', complete: false };
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const body = raw.subarray(end + 4);
  const length = headers['content-length'] === undefined ? null : Number(headers['content-length']);
  return {
    status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? '')?.[1] ?? NaN) || null,
    headers,
    body: body.toString('utf8'),
    complete: length !== null && body.length >= length,
  };
};

/** Sends `parts` over a fresh connection and collects the first answer. Never rejects on socket errors. */
export const rawRequest = (url: string, options: RawOptions): Promise<RawAnswer> => {
  const { hostname, port } = new URL(url);
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    const received: Buffer[] = [];
    let settled = false;
    const finish = (closedByServer: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      const answer = parse(Buffer.concat(received));
      resolve({ status: answer.status, headers: answer.headers, body: answer.body, closedByServer, elapsedMs: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false), options.waitMs ?? 10_000);
    socket.on('data', (chunk) => {
      received.push(chunk);
      if (parse(Buffer.concat(received)).complete) finish(false);
    });
    socket.on('error', () => finish(true));
    socket.on('close', () => finish(true));
    socket.once('connect', async () => {
      for (const part of options.parts) {
        if (settled || socket.destroyed) return;
        if (typeof part === 'function') await part(socket);
        else await new Promise<void>((done) => socket.write(part, () => done()));
      }
      if (options.abandon === true) finish(false);
    });
  });
};

/** A multipart/form-data body from parts given as [headers, content]. */
export const multipart = (boundary: string, parts: readonly (readonly [string, Buffer | string])[], closing = true): Buffer =>
  Buffer.concat([
    ...parts.flatMap(([headers, content]) => [Buffer.from(`--${boundary}\r\n${headers}\r\n\r\n`), Buffer.from(content), Buffer.from('\r\n')]),
    Buffer.from(closing ? `--${boundary}--\r\n` : ''),
  ]);

/** The request head of a POST with the given headers (Host added). */
export const postHead = (path: string, headers: Readonly<Record<string, string | number>>): string =>
  [`POST ${path} HTTP/1.1`, 'Host: test', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n');
