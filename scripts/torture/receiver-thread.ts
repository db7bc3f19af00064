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
  | { readonly kind: 'delivery'; readonly label: string; readonly request: ReceivedRequest; readonly at: number; readonly status: number }
  | { readonly kind: 'closed' };

const port = parentPort;
if (port === null) throw new Error('receiver-thread runs in a worker thread');

/** The first attempt of one delivery in eight (by X-Webhook-Id) fails, so retries run across crashes too. */
const failsFirstAttempt = (request: ReceivedRequest): boolean =>
  request.headers['x-webhook-attempt'] === '1' && (createHash('sha256').update(String(request.headers['x-webhook-id'])).digest()[0] ?? 0) % 8 === 0;

const send = (message: FromReceiver): void => port.postMessage(message);
const receiver = await startReceiver();
/** Labels whose deliveries are answered 503 (about to be deleted). */
const failing = new Set<string>();
receiver.respond((request) => {
  const label = request.path.split('/').at(-1) ?? '';
  const status = failing.has(label) ? 503 : failsFirstAttempt(request) ? 500 : 200;
  send({ kind: 'delivery', label, request, at: Date.now(), status });
  return { kind: 'status', status };
});
port.on('message', (message: ToReceiver) => {
  if (message.kind === 'failing') failing.add(message.label);
  else void receiver.close().then(() => send({ kind: 'closed' }));
});
send({ kind: 'ready', url: receiver.url });
