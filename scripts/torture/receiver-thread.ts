// The torture's webhook receiver in a worker thread of its own. In the harness's event loop, which the
// traffic it generates keeps saturated, a delivery's arrival was timed hundreds of milliseconds after
// the request reached the socket, and the check "nothing arrives after a DELETE was answered" then
// blamed the service for the harness's own delay. Here the loop does nothing but receive, so the
// arrival time is the network's; the harness learns of each delivery by a message.
import { createHash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { startReceiver, type ReceivedRequest } from '../../test/support/receiver.js';

/** Harness → receiver. */
export type ToReceiver = { readonly kind: 'failing'; readonly label: string } | { readonly kind: 'close' };
/** Receiver → harness. */
export type FromReceiver =
  | { readonly kind: 'ready'; readonly url: string }
  | { readonly kind: 'delivery'; readonly label: string; readonly request: ReceivedRequest; readonly at: number; readonly lagMs: number; readonly status: number }
  | { readonly kind: 'closed' };

const port = parentPort;
if (port === null) throw new Error('receiver-thread runs in a worker thread');

/** The first attempt of one delivery in eight (by X-Webhook-Id) fails, so retries run across crashes too. */
const failsFirstAttempt = (request: ReceivedRequest): boolean =>
  request.headers['x-webhook-attempt'] === '1' && (createHash('sha256').update(String(request.headers['x-webhook-id'])).digest()[0] ?? 0) % 8 === 0;

const send = (message: FromReceiver): void => port.postMessage(message);

/** How often the thread's timers note that its event loop runs. */
const TICK_MS = 10;
/** How far back a stall may have held a request that is recorded now. */
const LAG_WINDOW_MS = 1_000;
let lastTick = performance.now();
/** The gaps between ticks longer than a tick, of the last LAG_WINDOW_MS: [when it ended, how long]. */
let gaps: [number, number][] = [];
setInterval(() => {
  const now = performance.now();
  if (now - lastTick > 2 * TICK_MS) gaps.push([now, now - lastTick - TICK_MS]);
  gaps = gaps.filter(([at]) => at > now - LAG_WINDOW_MS);
  lastTick = now;
}, TICK_MS).unref();
/**
 * How long this thread may have held the request before recording it: a thread that did not run (a
 * host busier than its cores) reads what reached its socket meanwhile late, so the arrival was
 * between `at - lagMs` and `at`.
 */
const lagNow = (): number => {
  const now = performance.now();
  return Math.round(Math.max(now - lastTick - TICK_MS, 0, ...gaps.map(([, gap]) => gap)));
};
const receiver = await startReceiver();
/** Labels whose deliveries are answered 503 (about to be deleted). */
const failing = new Set<string>();
receiver.respond((request) => {
  const label = request.path.split('/').at(-1) ?? '';
  const status = failing.has(label) ? 503 : failsFirstAttempt(request) ? 500 : 200;
  send({ kind: 'delivery', label, request, at: Date.now(), lagMs: lagNow(), status });
  return { kind: 'status', status };
});
port.on('message', (message: ToReceiver) => {
  if (message.kind === 'failing') failing.add(message.label);
  else void receiver.close().then(() => send({ kind: 'closed' }));
});
send({ kind: 'ready', url: receiver.url });
