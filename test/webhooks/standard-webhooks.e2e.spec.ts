// Standard Webhooks end to end: a real receiver checks every delivery with the official
// `standardwebhooks` library, given the secret exactly as creation answered it, and nothing else.
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { systemMicros } from '../../src/log/clock.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startReceiver, type Behaviour, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { verdictOf, type Verdict } from '../support/standard-webhooks.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { FAST_RETRIES, emit, header, subscribe } from '../support/webhooks-dispatch.js';

describe('Standard Webhooks headers (e2e, official standardwebhooks library)', () => {
  let test: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;
  /** The library's verdict on each request, in arrival order. */
  let verdicts: Verdict[];

  /** A subscription whose receiver verifies with the library: 204 when it verifies, 400 otherwise. */
  const verifyingSubscription = async (): Promise<{ id: string; secret: string }> => {
    const sub = await subscribe(ws, receiver.url);
    const hook = new Webhook(sub.secret);
    receiver.respond((request): Behaviour => {
      const verdict = verdictOf(hook, request);
      verdicts.push(verdict);
      return { kind: 'status', status: verdict.ok ? 204 : 400 };
    });
    return sub;
  };

  const start = async (clock?: () => number): Promise<void> => {
    test = await startTestService(FAST_RETRIES, clock === undefined ? {} : { clock });
    ws = await test.createWorkspace();
  };

  beforeEach(async () => {
    receiver = await startReceiver();
    verdicts = [];
  });
  afterEach(async () => {
    await receiver.close();
    await test.close();
  });

  it('a test delivery verifies with the secret as answered on create; the contract headers are unchanged beside it', async () => {
    await start();
    const { id, secret } = await verifyingSubscription();
    const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
    expect(reply.body).to.include({ delivered: true, status_code: 204 });
    expect(verdicts).to.have.length(1);
    expect(verdicts[0]).to.deep.include({ ok: true });
    const [request] = receiver.requests as [ReceivedRequest];
    expect((verdicts[0] as { payload: { type: string } }).payload.type).to.equal('webhook.test');
    expect(header(request, 'webhook-id')).to.equal(reply.body.delivery_id);
    expect(header(request, 'x-webhook-id')).to.equal(reply.body.delivery_id);
    expect(header(request, 'x-webhook-signature')).to.equal(reply.body.signature_header);
    expect(verifySignature(secret, request.body, header(request, 'x-webhook-signature'))).to.equal(true);
    expect(header(request, 'webhook-signature')).to.match(/^v1,[A-Za-z0-9+/]{43}=$/);
    expect(Math.abs(Number(header(request, 'webhook-timestamp')) - Date.now() / 1000)).to.be.below(60);
  });

  it('every attempt of a retried delivery verifies: the same id and body bytes, each signed at its own send time', async () => {
    await start();
    const { secret } = await verifyingSubscription();
    receiver.respondOnce({ kind: 'status', status: 500 }, { kind: 'status', status: 503 });
    await emit(test, ws.workspaceId);
    const attempts = await receiver.waitForRequests(3);
    expect(verdicts).to.have.length(1);
    expect(verdicts[0]).to.deep.include({ ok: true });
    const [first] = attempts as [ReceivedRequest];
    for (const attempt of attempts) {
      // The two failures were answered without the library: it checks them now, within its tolerance.
      expect(verdictOf(new Webhook(secret), attempt)).to.deep.include({ ok: true });
      expect(attempt.body.equals(first.body)).to.equal(true);
      expect(header(attempt, 'webhook-id')).to.equal(header(first, 'x-webhook-id'));
      expect(header(attempt, 'webhook-id')).to.equal(header(attempt, 'x-webhook-id'));
    }
    expect(attempts.map((a) => header(a, 'x-webhook-attempt'))).to.deep.equal(['1', '2', '3']);
    const times = attempts.map((a) => Number(header(a, 'webhook-timestamp')));
    expect([...times].sort()).to.deep.equal(times);
  });

  it('the library refuses a delivery whose body, id or signature was altered', async () => {
    await start();
    const { id, secret } = await verifyingSubscription();
    await ws.api('POST', `/api/v1/webhooks/${id}/test`);
    const [request] = receiver.requests as [ReceivedRequest];
    const hook = new Webhook(secret);
    expect(verdictOf(hook, request)).to.deep.include({ ok: true });
    // One letter of the message text changed: the JSON stays valid, only the signature can tell.
    const tampered = Buffer.from(request.body.toString('utf8').replace('Test event', 'Test evenT'));
    expect(verdictOf(hook, { ...request, body: tampered })).to.deep.equal({ ok: false, error: 'No matching signature found' });
    const otherId = { ...request, headers: { ...request.headers, 'webhook-id': 'another' } };
    expect(verdictOf(hook, otherId)).to.deep.equal({ ok: false, error: 'No matching signature found' });
    const [, mac] = header(request, 'webhook-signature').split(',');
    const otherSignature = { ...request, headers: { ...request.headers, 'webhook-signature': `v1a,${mac}` } };
    expect(verdictOf(hook, otherSignature)).to.deep.equal({ ok: false, error: 'No matching signature found' });
    const otherSecret = await subscribe(ws, receiver.url);
    expect(verdictOf(new Webhook(otherSecret.secret), request)).to.deep.equal({ ok: false, error: 'No matching signature found' });
  });

  it("an attempt signed 10 minutes ago fails the library's timestamp tolerance (replay protection)", async () => {
    await start(() => systemMicros() - 600 * 1_000_000);
    const { id, secret } = await verifyingSubscription();
    const reply = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
    expect(reply.body).to.include({ delivered: false, status_code: 400 });
    expect(verdicts).to.deep.equal([{ ok: false, error: 'Message timestamp too old' }]);
    // The signature itself is right: only its age is refused.
    const [request] = receiver.requests as [ReceivedRequest];
    const at = new Date(Number(header(request, 'webhook-timestamp')) * 1000);
    expect(new Webhook(secret).sign(header(request, 'webhook-id'), at, request.body)).to.equal(header(request, 'webhook-signature'));
  });
});
