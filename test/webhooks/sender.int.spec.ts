// The sender against a real local receiver: every failure kind, exact bytes, signature over the raw
// body, keep-alive reuse, and the SSRF guard on real connects.
import { expect } from 'chai';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createSender, type DeliveryRequest, type Sender } from '../../src/webhooks/sender.js';
import { signStandard, standardKey, verifySignature } from '../../src/webhooks/signature.js';
import { startReceiver, type Receiver } from '../support/receiver.js';

const LOOPBACK = ['127.0.0.0/8', '::1/128'];
const SECRET = 'whsec_test';
// Non-ASCII and odd spacing: a receiver that re-serializes would compute another signature.
const BODY = Buffer.from('{"id":"e1", "type":"ticket.created","data":{"subject":"Grüße \\u00e9"}}');

const requestTo = (url: string, overrides: Partial<DeliveryRequest> = {}): DeliveryRequest => ({
  url,
  body: BODY,
  eventType: 'ticket.created',
  deliveryId: 'd1',
  attempt: 2,
  secrets: { current: SECRET, previous: null },
  ...overrides,
});

const freePort = async (): Promise<number> => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
};

describe('webhook sender (real receiver)', () => {
  let receiver: Receiver;
  let sender: Sender;

  beforeEach(async () => {
    receiver = await startReceiver();
    sender = createSender({ timeoutMs: 300, allowedNetworks: LOOPBACK });
  });
  afterEach(async () => {
    await receiver.close();
    await sender.close();
  });

  it('POSTs the exact bytes with the documented headers, and the signature verifies over the raw body', async () => {
    const outcome = await sender.send(requestTo(receiver.url));
    expect(outcome).to.include({ delivered: true, statusCode: 200, error: null });
    const [received] = receiver.requests;
    expect(received?.method).to.equal('POST');
    expect(received?.body.equals(BODY)).to.equal(true);
    expect(received?.headers).to.include({
      'content-type': 'application/json',
      'x-webhook-event': 'ticket.created',
      'x-webhook-id': 'd1',
      'x-webhook-attempt': '2',
    });
    const header = received?.headers['x-webhook-signature'] as string;
    expect(header).to.match(/^sha256=[0-9a-f]{64}$/);
    expect(verifySignature(SECRET, received?.body ?? Buffer.alloc(0), header)).to.equal(true);
    const reserialized = JSON.stringify(JSON.parse(received?.body.toString('utf8') ?? ''));
    expect(verifySignature(SECRET, reserialized, header)).to.equal(false);
  });

  it('adds the Standard Webhooks headers: the delivery id, the send time from its clock, the v1 signature of both and the bytes', async () => {
    const at = 1_900_000_000;
    const clocked = createSender({ timeoutMs: 300, allowedNetworks: LOOPBACK, clock: () => at * 1_000_000 + 999_999 });
    try {
      expect(await clocked.send(requestTo(receiver.url))).to.include({ delivered: true });
    } finally {
      await clocked.close();
    }
    const [received] = receiver.requests;
    expect(received?.headers).to.include({
      'webhook-id': 'd1',
      'webhook-timestamp': String(at),
      'webhook-signature': signStandard(standardKey(SECRET), 'd1', at, BODY),
    });
    expect(received?.headers['webhook-signature']).to.not.equal(signStandard(standardKey(SECRET), 'd1', at + 1, BODY));
  });

  it("signs with the secrets valid at its send time: both during a grace period (newest first), the replaced one in X-Webhook-Signature until it ends", async () => {
    const at = 1_900_000_000;
    const secrets = { current: 'whsec_bmV3LXNlY3JldC1ieXRlcy0zMi1sb25nLi4uLi4=', previous: { secret: SECRET, expiresAt: (at + 10) * 1_000_000 } };
    const sentAt = async (seconds: number) => {
      const clocked = createSender({ timeoutMs: 300, allowedNetworks: LOOPBACK, clock: () => seconds * 1_000_000 });
      try {
        expect(await clocked.send(requestTo(receiver.url, { secrets }))).to.include({ delivered: true });
      } finally {
        await clocked.close();
      }
      return receiver.requests.at(-1)?.headers ?? {};
    };
    const during = await sentAt(at + 9);
    const both = [signStandard(standardKey(secrets.current), 'd1', at + 9, BODY), signStandard(standardKey(SECRET), 'd1', at + 9, BODY)];
    expect(during['webhook-signature']).to.equal(both.join(' '));
    expect(verifySignature(SECRET, BODY, String(during['x-webhook-signature']))).to.equal(true);
    const after = await sentAt(at + 10);
    expect(after['webhook-signature']).to.equal(signStandard(standardKey(secrets.current), 'd1', at + 10, BODY));
    expect(verifySignature(secrets.current, BODY, String(after['x-webhook-signature']))).to.equal(true);
    expect(verifySignature(SECRET, BODY, String(after['x-webhook-signature']))).to.equal(false);
  });

  it('counts any 2xx as delivered', async () => {
    receiver.respond({ kind: 'status', status: 204 });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: true, statusCode: 204 });
  });

  it('fails on a 5xx and on a 4xx with the status code', async () => {
    receiver.respondOnce({ kind: 'status', status: 500, body: 'boom' }, { kind: 'status', status: 410 });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: false, statusCode: 500, error: 'HTTP 500' });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: false, statusCode: 410, error: 'HTTP 410' });
  });

  it('never follows a redirect: a 3xx is a failure', async () => {
    receiver.respondOnce({ kind: 'redirect', status: 307, location: `${receiver.url}/elsewhere` });
    const outcome = await sender.send(requestTo(receiver.url));
    expect(outcome).to.include({ delivered: false, statusCode: 307 });
    expect(outcome.error).to.match(/redirect/);
    expect(receiver.requests).to.have.length(1);
  });

  it('fails with a timeout when the receiver does not answer in time', async () => {
    receiver.respond({ kind: 'hang' });
    const outcome = await sender.send(requestTo(receiver.url));
    expect(outcome).to.include({ delivered: false, statusCode: null });
    expect(outcome.error).to.match(/^timeout/);
  });

  it('fails with a timeout when the answer comes after the deadline', async () => {
    receiver.respond({ kind: 'delay', ms: 1000, status: 200 });
    const outcome = await sender.send(requestTo(receiver.url));
    expect(outcome.delivered).to.equal(false);
    expect(outcome.error).to.match(/^timeout/);
  });

  it('cancels an attempt in flight at once, and never sends one that was not written yet', async () => {
    const one = createSender({ timeoutMs: 5_000, allowedNetworks: LOOPBACK, maxConnections: 1 });
    try {
      receiver.respond({ kind: 'hang' });
      const cancels: (() => void)[] = [];
      const hanging = one.send(requestTo(receiver.url), (cancel) => cancels.push(cancel));
      await receiver.waitForRequests(1);
      // The only connection is taken: this one waits in the pool, unwritten.
      const queued = one.send(requestTo(receiver.url, { deliveryId: 'd2' }), (cancel) => cancels.push(cancel));
      const started = performance.now();
      cancels.forEach((cancel) => cancel());
      for (const outcome of await Promise.all([hanging, queued])) {
        expect(outcome).to.include({ delivered: false, statusCode: null, error: 'cancelled: the subscription was deleted' });
      }
      expect(performance.now() - started).to.be.lessThan(1_000);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(receiver.requests.map((r) => r.headers['x-webhook-id'])).to.deep.equal(['d1']);
    } finally {
      await one.close();
    }
  });

  it('asks whether the attempt is still wanted just before writing it, and sends nothing when it is not', async () => {
    const outcome = await sender.send(requestTo(receiver.url, { wanted: () => false }));
    expect(outcome).to.include({ delivered: false, statusCode: null, error: 'cancelled: the subscription was deleted' });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.requests).to.deep.equal([]);
    expect(await sender.send(requestTo(receiver.url, { wanted: () => true }))).to.include({ delivered: true });
  });

  it('fails on a connection reset', async () => {
    receiver.respond({ kind: 'reset' });
    const outcome = await sender.send(requestTo(receiver.url));
    expect(outcome).to.include({ delivered: false, statusCode: null });
    expect(outcome.error).to.match(/reset|closed/);
  });

  it('fails when nothing listens', async () => {
    const outcome = await sender.send(requestTo(`http://127.0.0.1:${await freePort()}/hook`));
    expect(outcome).to.include({ delivered: false, statusCode: null });
    expect(outcome.error).to.match(/connection refused/);
  });

  it('decides on the status line: a huge or broken 2xx body is still a delivery, and the sender stays usable', async () => {
    receiver.respondOnce({ kind: 'huge', bytes: 50 * 1024 * 1024 }, { kind: 'close-mid-body' });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: true, statusCode: 200 });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: true, statusCode: 200 });
    expect(await sender.send(requestTo(receiver.url))).to.include({ delivered: true, statusCode: 200 });
  });

  it('reuses a keep-alive connection for consecutive attempts', async () => {
    for (let i = 0; i < 4; i++) await sender.send(requestTo(receiver.url));
    // undici may open a second socket while the first is being released, but not one per attempt.
    expect(new Set(receiver.requests.map((r) => r.remotePort)).size).to.be.lessThan(4);
  });

  it('refuses what is not an absolute http(s) URL without connecting', async () => {
    const port = new URL(receiver.url).port;
    for (const url of ['', '   ', 'not a url', '/hook', `//127.0.0.1:${port}/hook`, `ftp://127.0.0.1:${port}/hook`, `ws://127.0.0.1:${port}/hook`, 'http://', `http://127.0.0.1:${port}0000/hook`]) {
      expect(await sender.send(requestTo(url)), url).to.deep.equal({ delivered: false, statusCode: null, error: 'invalid url: must be an absolute http or https URL', latencyMs: 0 });
    }
    expect(receiver.requests).to.deep.equal([]);
  });

  describe('SSRF guard (default networks)', () => {
    let guarded: Sender;
    beforeEach(() => {
      guarded = createSender({ timeoutMs: 300, allowedNetworks: [] });
    });
    afterEach(() => guarded.close());

    for (const host of ['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]', '0.0.0.0']) {
      it(`refuses ${host} without sending anything`, async () => {
        const outcome = await guarded.send(requestTo(`http://${host}:${receiver.port}/hook`));
        expect(outcome).to.include({ delivered: false, statusCode: null });
        expect(outcome.error).to.match(/^blocked address/);
        expect(outcome.error).to.contain('WEBHOOK_ALLOWED_NETWORKS');
        expect(receiver.requests).to.have.length(0);
      });
    }

    for (const host of ['169.254.169.254', '10.0.0.1', '[fe80::1]', '[fd00::1]', '100.64.0.1']) {
      it(`refuses the internal address ${host} without connecting`, async () => {
        const outcome = await guarded.send(requestTo(`http://${host}:80/hook`));
        expect(outcome).to.include({ delivered: false, statusCode: null });
        expect(outcome.error).to.match(/^blocked address/);
      });
    }

    it('never follows a redirect to an internal address', async () => {
      const open = createSender({ timeoutMs: 300, allowedNetworks: ['127.0.0.0/8'] });
      try {
        receiver.respond({ kind: 'status', status: 302, headers: { location: 'http://169.254.169.254/latest/meta-data/' } });
        const outcome = await open.send(requestTo(`http://127.0.0.1:${receiver.port}/hook`));
        expect(outcome).to.include({ delivered: false, statusCode: 302 });
        expect(receiver.requests).to.have.length(1);
      } finally {
        await open.close();
      }
    });
  });
});
