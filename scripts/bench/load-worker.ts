// The api bench's load generator, in a worker thread of its own: autocannon on 64 kept-alive
// connections for a warm-up and then the measured seconds, on the same connections. Latencies are
// taken from the responses that arrive after the warm-up only (and those of the warm-up apart).
// Why: since libuv 1.45 (Node 20) a server accepts ONE connection per turn of its event loop
// (libuv/libuv#3696), so a saturated server takes up 64 new connections over 64 turns, each turn
// serving every connection already in (for `POST /tickets` about 0.8 s, where the last connection's
// first request waits all of it); the first second also runs code not yet optimized. Both are the
// first second of a load, not its steady state, and they were a tenth of a 10 s phase's requests.
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
const { warmupSeconds, seconds, ...request } = options;
const warm: number[] = [];
const measured: number[] = [];
/** When the warm-up ended; null during it. */
let measuring: number | null = null;
let settle: (error: unknown, result: autocannon.Result) => void = () => undefined;
const ran = new Promise<autocannon.Result>((resolve, reject) => {
  settle = (error, result) => (error === null || error === undefined ? resolve(result) : reject(error as Error));
});
const instance = autocannon({ ...request, duration: warmupSeconds + seconds }, (error, result) => settle(error, result));
const warmupEnds = setTimeout(() => {
  measuring = performance.now();
  port.postMessage({ kind: 'measuring' } satisfies LoadReport);
}, warmupSeconds * 1000);
instance.on('response', (_client: unknown, _status: number, _bytes: number, latencyMs: number) => {
  (measuring === null ? warm : measured).push(latencyMs);
});
const result = await ran;
clearTimeout(warmupEnds);
const spanS = measuring === null ? 0 : (performance.now() - measuring) / 1000;

port.postMessage({
  kind: 'done',
  rps: Math.round(measured.length / Math.max(spanS, 0.001)),
  p99: quantiles(measured).p99,
  warmupP99: quantiles(warm).p99,
  requests: measured.length,
  errors: result.non2xx + result.errors + result.timeouts,
} satisfies LoadReport);
