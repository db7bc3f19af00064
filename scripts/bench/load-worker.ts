// The api bench's load generator, in a worker thread of its own: autocannon on 64 kept-alive
// connections for a warm-up and then the measured seconds, on the same connections. Latencies are
// taken from the responses that arrive after the warm-up only (and those of the warm-up apart).
// Why: since libuv 1.45 (Node 20) a server accepts ONE connection per turn of its event loop
// (libuv/libuv#3696), so a saturated server takes up 64 new connections over 64 turns, each turn
// serving every connection already in (for `POST /tickets` about 0.8 s, where the last connection's
// first request waits all of it); the first second also runs code not yet optimized. Both are the
// first second of a load, not its steady state, and they were a tenth of a 10 s phase's requests.
// With `connectionPerRequest`, each request opens a connection of its own and asks the server to close
// it (`Connection: close`), as clients without keep-alive do: then every request is also an accept.
import { request as httpRequest } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { quantiles } from './quantiles.js';

export interface LoadOptions {
  readonly url: string;
  readonly method?: 'GET' | 'POST';
  readonly headers?: Record<string, string>;
  readonly body?: string;
  readonly idReplacement?: boolean;
  readonly connections: number;
  /** A new connection for every request, closed after its answer (autocannon keeps its connections). */
  readonly connectionPerRequest?: boolean;
  readonly warmupSeconds: number;
  readonly seconds: number;
}

/** Worker → parent: the warm-up is over (the parent starts its CPU count), then the figures. */
export type LoadReport =
  | { readonly kind: 'measuring' }
  | {
      readonly kind: 'done';
      /** Responses a second after the warm-up. */
      readonly rps: number;
      readonly p99: number;
      /** p99 of the warm-up's responses: new connections and code not yet optimized. */
      readonly warmupP99: number;
      /** Responses after the warm-up. */
      readonly requests: number;
      /** Non-2xx answers, errors and timeouts of the whole run, warm-up included. */
      readonly errors: number;
    };

const port = parentPort;
if (port === null) throw new Error('load-worker runs in a worker thread');
const options = workerData as LoadOptions;
const { warmupSeconds, seconds, connectionPerRequest, ...request } = options;
const warm: number[] = [];
const measured: number[] = [];
/** When the warm-up ended; null during it. */
let measuring: number | null = null;
const answered = (latencyMs: number): void => {
  (measuring === null ? warm : measured).push(latencyMs);
};

/** autocannon on kept-alive connections: the count of non-2xx answers, errors and timeouts. */
const keptAlive = async (): Promise<number> => {
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({ ...request, duration: warmupSeconds + seconds }, (error, done) => (error === null || error === undefined ? resolve(done) : reject(error as Error)));
    instance.on('response', (_client: unknown, _status: number, _bytes: number, latencyMs: number) => answered(latencyMs));
  });
  return result.non2xx + result.errors + result.timeouts;
};

/** `connections` loops, each sending one request at a time on a connection of its own: the count of non-2xx answers and errors. */
const connectionEach = async (): Promise<number> => {
  const url = new URL(request.url);
  const until = performance.now() + (warmupSeconds + seconds) * 1000;
  let failed = 0;
  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const sent = performance.now();
      let settled = false;
      /** Once per request: an answer read to its end counts its latency, anything else is a failure. */
      const settle = (status: number | null): void => {
        if (settled) return;
        settled = true;
        if (status === null || status >= 300) failed += 1;
        if (status !== null) answered(performance.now() - sent);
        resolve();
      };
      const req = httpRequest(
        { host: url.hostname, port: url.port, path: url.pathname, method: request.method ?? 'GET', agent: false, headers: { ...request.headers, connection: 'close' } },
        (res) => {
          res.resume();
          res.once('end', () => settle(res.statusCode ?? 0));
          res.once('close', () => settle(null));
        },
      );
      // As autocannon's own default: an answer not there after 10 s is a failure.
      req.setTimeout(10_000, () => req.destroy(new Error('no answer within 10 s')));
      req.on('error', () => settle(null));
      req.end(request.body);
    });
  await Promise.all(
    Array.from({ length: options.connections }, async () => {
      while (performance.now() < until) await once();
    }),
  );
  return failed;
};

const warmupEnds = setTimeout(() => {
  measuring = performance.now();
  port.postMessage({ kind: 'measuring' } satisfies LoadReport);
}, warmupSeconds * 1000);
const errors = await (connectionPerRequest === true ? connectionEach() : keptAlive());
clearTimeout(warmupEnds);
const spanS = measuring === null ? 0 : (performance.now() - measuring) / 1000;

port.postMessage({
  kind: 'done',
  rps: Math.round(measured.length / Math.max(spanS, 0.001)),
  p99: quantiles(measured).p99,
  warmupP99: quantiles(warm).p99,
  requests: measured.length,
  errors,
} satisfies LoadReport);
