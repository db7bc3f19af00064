// The sender's deadline measures the receiver, not this process: a receiver in another process
// answers in milliseconds while this process's event loop is blocked past the deadline, and the
// attempt is a delivery; a receiver that really answers late is still a timeout.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createSender, type DeliveryRequest, type Sender } from '../../src/webhooks/sender.js';

const TIMEOUT_MS = 300;

/** An HTTP receiver in its own process: answers 200 after `?delay=ms` (default at once). */
const RECEIVER = `
const http = require('node:http');
http.createServer((req, res) => {
  const delay = Number(new URL(req.url, 'http://x').searchParams.get('delay') ?? 0);
  req.resume();
  req.on('end', () => setTimeout(() => res.end('ok'), delay));
}).listen(0, '127.0.0.1', function () { console.log(this.address().port); });
`;

/** Keeps this process's event loop busy, as a burst of request handling does. */
const blockFor = (ms: number): void => {
  const until = performance.now() + ms;
  while (performance.now() < until);
};

const request = (url: string): DeliveryRequest => ({ url, body: Buffer.from('{}'), eventType: 'ticket.created', deliveryId: 'd1', attempt: 1, secrets: { current: 's', previous: null } });

describe('webhook sender deadline (receiver in another process)', () => {
  let child: ChildProcess;
  let base: string;
  let sender: Sender;

  before(async () => {
    child = spawn(process.execPath, ['-e', RECEIVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [line] = (await once(child.stdout!, 'data')) as [Buffer];
    base = `http://127.0.0.1:${line.toString().trim()}/hook`;
  });
  after(() => child.kill());
  beforeEach(() => {
    sender = createSender({ timeoutMs: TIMEOUT_MS, allowedNetworks: ['127.0.0.0/8'] });
  });
  afterEach(() => sender.close());

  it('is a delivery when the receiver answered while this process was blocked past the deadline', async () => {
    // A kept-alive connection: the request goes out at once, the answer waits in the socket.
    expect(await sender.send(request(base))).to.include({ delivered: true });
    const attempt = sender.send(request(base));
    blockFor(TIMEOUT_MS * 3);
    expect(await attempt).to.include({ delivered: true, statusCode: 200, error: null });
  });

  it('is a delivery when this process was too busy to send the request before the deadline', async () => {
    // A new sender, so a new connection: connecting and writing wait for the blocked event loop.
    const attempt = sender.send(request(base));
    blockFor(TIMEOUT_MS * 3);
    expect(await attempt).to.include({ delivered: true, statusCode: 200, error: null });
  });

  it('is still a timeout when the receiver answers after the deadline, blocked or not', async () => {
    const attempt = sender.send(request(`${base}?delay=${TIMEOUT_MS * 3}`));
    blockFor(TIMEOUT_MS / 2);
    const outcome = await attempt;
    expect(outcome).to.include({ delivered: false, statusCode: null });
    expect(outcome.error).to.equal(`timeout: no response within ${TIMEOUT_MS} ms`);
  });
});
