// A real local HTTP receiver for webhook tests. It records every request (raw body bytes and
// headers) and answers as told.
//
//   const receiver = await startReceiver();          // listens on 127.0.0.1, random port
//   receiver.url                                     // 'http://127.0.0.1:<port>/hook'
//   receiver.respond({ kind: 'status', status: 500 }); // default answer for every request (initially 200)
//   receiver.respondOnce({ kind: 'hang' }, ...)      // queued answers, used first, one per request
//   await receiver.waitForRequests(3)                // resolves with the first 3 requests once received
//   receiver.requests                                // every ReceivedRequest so far, in arrival order
//                                                    // ({method, path, headers, body: Buffer, remotePort})
//   await receiver.close()                           // also destroys hanging connections
//
// Answers (Behaviour):
//   { kind: 'status', status, body?, headers? }  answer with that status (body default '')
//   { kind: 'hang' }                             read the request, never answer
//   { kind: 'reset' }                            read the request, then destroy the socket (ECONNRESET)
//   { kind: 'redirect', location, status? }      3xx (default 302) with a Location header
//   { kind: 'huge', bytes, status? }             stream `bytes` bytes of body (default status 200)
//   { kind: 'close-mid-body', status? }          announce a 1 MiB body, send 10 bytes, destroy
//   { kind: 'delay', ms, status }                answer `status` after `ms` milliseconds
// A function (request) => Behaviour may be given instead, e.g. to verify signatures per request.
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  /** Header names are lower case (node's IncomingHttpHeaders). */
  readonly headers: IncomingHttpHeaders;
  /** The body exactly as received. */
  readonly body: Buffer;
  /** The client's port: equal ports on two requests mean one reused (keep-alive) connection. */
  readonly remotePort: number;
}

export type Behaviour =
  | { readonly kind: 'status'; readonly status: number; readonly body?: string; readonly headers?: Record<string, string> }
  | { readonly kind: 'hang' }
  | { readonly kind: 'reset' }
  | { readonly kind: 'redirect'; readonly location: string; readonly status?: number }
  | { readonly kind: 'huge'; readonly bytes: number; readonly status?: number }
  | { readonly kind: 'close-mid-body'; readonly status?: number }
  | { readonly kind: 'delay'; readonly ms: number; readonly status: number };

export type Answer = Behaviour | ((request: ReceivedRequest) => Behaviour);

export interface Receiver {
  readonly url: string;
  readonly port: number;
  readonly requests: readonly ReceivedRequest[];
  respond(answer: Answer): void;
  respondOnce(...answers: Answer[]): void;
  waitForRequests(count: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

const readBody = (request: IncomingMessage): Promise<Buffer> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => resolve(Buffer.concat(chunks)));
    request.on('error', reject);
  });

const streamBytes = (response: ServerResponse, bytes: number): void => {
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let left = bytes;
  const pump = (): void => {
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= piece.length;
      // Stop when the client stops reading (it closed the connection or its buffer is full).
      if (response.destroyed) return;
      if (!response.write(piece)) {
        response.once('drain', pump);
        return;
      }
    }
    response.end();
  };
  pump();
};

const perform = (behaviour: Behaviour, response: ServerResponse, socket: Socket, timers: Set<NodeJS.Timeout>): void => {
  switch (behaviour.kind) {
    case 'status':
      response.writeHead(behaviour.status, behaviour.headers ?? {});
      response.end(behaviour.body ?? '');
      return;
    case 'hang':
      return;
    case 'reset':
      socket.resetAndDestroy();
      return;
    case 'redirect':
      response.writeHead(behaviour.status ?? 302, { location: behaviour.location });
      response.end();
      return;
    case 'huge':
      response.writeHead(behaviour.status ?? 200, { 'content-type': 'application/octet-stream', 'content-length': String(behaviour.bytes) });
      streamBytes(response, behaviour.bytes);
      return;
    case 'close-mid-body':
      response.writeHead(behaviour.status ?? 200, { 'content-length': String(1024 * 1024) });
      response.write(Buffer.alloc(10, 0x62), () => socket.destroy());
      return;
    case 'delay': {
      const timer = setTimeout(() => {
        timers.delete(timer);
        response.writeHead(behaviour.status);
        response.end();
      }, behaviour.ms);
      timers.add(timer);
      return;
    }
  }
};

/** `port` 0 picks a free one; a fixed port brings a receiver up where a client already sends. */
export const startReceiver = async (host = '127.0.0.1', wantedPort = 0): Promise<Receiver> => {
  const requests: ReceivedRequest[] = [];
  const queued: Answer[] = [];
  const waiters: { count: number; resolve: (r: ReceivedRequest[]) => void }[] = [];
  const timers = new Set<NodeJS.Timeout>();
  let fallback: Answer = { kind: 'status', status: 200 };

  const settleWaiters = (): void => {
    for (const waiter of [...waiters]) {
      if (requests.length < waiter.count) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(requests.slice(0, waiter.count));
    }
  };

  const server = createServer((request, response) => {
    void readBody(request).then((body) => {
      const received: ReceivedRequest = { method: request.method ?? '', path: request.url ?? '', headers: request.headers, body, remotePort: request.socket.remotePort ?? 0 };
      requests.push(received);
      const answer = queued.shift() ?? fallback;
      perform(typeof answer === 'function' ? answer(received) : answer, response, request.socket, timers);
      settleWaiters();
    });
  });
  await new Promise<void>((resolve) => server.listen(wantedPort, host, resolve));
  const { port } = server.address() as AddressInfo;
  const hostPart = host.includes(':') ? `[${host}]` : host;

  return {
    url: `http://${hostPart}:${port}/hook`,
    port,
    requests,
    respond(answer) {
      fallback = answer;
    },
    respondOnce(...answers) {
      queued.push(...answers);
    },
    waitForRequests(count) {
      return new Promise((resolve) => {
        waiters.push({ count, resolve });
        settleWaiters();
      });
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
};
