// Requests sent exactly as written through node:http, for hostile-input tests: the request line,
// the header list (names may repeat, values go out as latin1) and the body bytes as given, nothing
// normalised, so only what Node's own client refuses cannot be sent (for arbitrary bytes on a
// socket, see raw-http.ts). A request without a complete answer within its deadline fails with a
// message instead of hanging the test.
import { request, type Agent, type IncomingHttpHeaders } from 'node:http';

export interface RawReply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  /** The body as UTF-8 text. */
  readonly text: string;
  /** The parsed body, or undefined when it is empty or not JSON. */
  readonly json: unknown;
  readonly elapsedMs: number;
}

export interface RawRequest {
  readonly method: string;
  /** The request target exactly as it goes on the request line (path and query). */
  readonly target: string;
  /** Header lines in order; a name may repeat. Values are written as latin1. */
  readonly headers?: readonly (readonly [string, string])[];
  /** One buffer: sent with Content-Length. An array: sent chunked, one chunk each ([] is an empty chunked body). None: no body (Content-Length: 0 where Node would send an empty chunked one). */
  readonly body?: Buffer | string | readonly Buffer[];
  readonly timeoutMs?: number;
  /** The agent whose connections to use (default: Node's global agent). */
  readonly agent?: Agent;
}

const DEFAULT_TIMEOUT_MS = 10_000;

const parsed = (status: number, headers: IncomingHttpHeaders, body: Buffer, started: number): RawReply => {
  const text = body.toString('utf8');
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, headers, body, text, json, elapsedMs: Date.now() - started };
};

export const sendRaw = (base: string, req: RawRequest): Promise<RawReply> =>
  new Promise((resolve, reject) => {
    const { hostname, port } = new URL(base);
    const started = Date.now();
    const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    // With a header list Node adds no Host line itself; Node's server refuses a request without one.
    const hasHost = (req.headers ?? []).some(([name]) => /^host$/i.test(name));
    const flat = [...(hasHost ? [] : ['Host', `${hostname}:${port}`]), ...(req.headers ?? []).flatMap(([name, value]) => [name, value])];
    const chunks = req.body === undefined ? [] : typeof req.body === 'string' ? [Buffer.from(req.body)] : Buffer.isBuffer(req.body) ? [req.body] : [...req.body];
    const chunked = req.body !== undefined && !Buffer.isBuffer(req.body) && typeof req.body !== 'string';
    const hasLength = (req.headers ?? []).some(([name]) => /^(content-length|transfer-encoding)$/i.test(name));
    if (!chunked && req.body !== undefined && !hasLength) flat.push('Content-Length', String(chunks[0]?.length ?? 0));
    if (chunked && !hasLength) flat.push('Transfer-Encoding', 'chunked');
    // Without a body Node would still send an empty chunked one for POST, PUT and PATCH: say "no body" plainly.
    if (req.body === undefined && !hasLength && !['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT'].includes(req.method.toUpperCase())) flat.push('Content-Length', '0');
    const outgoing = request({ hostname, port, method: req.method, path: req.target, headers: flat as unknown as Record<string, string>, ...(req.agent === undefined ? {} : { agent: req.agent }) }, (res) => {
      const received: Buffer[] = [];
      res.on('data', (chunk: Buffer) => received.push(chunk));
      res.on('end', () => {
        clearTimeout(timer);
        resolve(parsed(res.statusCode ?? 0, res.headers, Buffer.concat(received), started));
      });
      res.on('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const timer = setTimeout(() => outgoing.destroy(new Error(`no complete answer within ${timeoutMs} ms`)), timeoutMs);
    outgoing.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    for (const chunk of chunks.slice(0, -1)) outgoing.write(chunk);
    outgoing.end(chunks.at(-1));
  });
