// Rotating a subscription's signing secret with a grace period, end to end: a real receiver checks
// every delivery with the official `standardwebhooks` library given the old secret, and given the new
// one, before, during and after the grace period, and the contract's X-Webhook-Signature with the
// secret it should carry. The engine signs in its worker thread, at send time.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import { verifySignature } from '../../src/webhooks/signature.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../support/receiver.js';
import { call, startTestService, type Reply, type TestService, type TestWorkspace } from '../support/server.js';
import { verdictOf } from '../support/standard-webhooks.js';
import { FAST_RETRIES, emit, eventIdOf, eventually, header, requestsFor, subscribe } from '../support/webhooks-dispatch.js';

interface Rotation {
  readonly webhook_id: string;
  readonly secret: string;
  readonly previous_secret_expires_at: string;
}

const NOT_SIGNED = { ok: false, error: 'No matching signature found' };

/** The library's verdict with each secret, and whether X-Webhook-Signature is signed with each. */
const checked = (request: ReceivedRequest, secrets: readonly string[]) =>
  secrets.map((secret) => ({
    standard: verdictOf(new Webhook(secret), request).ok ? 'ok' : 'refused',
    contract: verifySignature(secret, request.body, header(request, 'x-webhook-signature')),
  }));

/** Both ways a subscription is delivered to: a test delivery, and an event through the engine (worker thread). */
const deliveries = async (test: TestService, ws: TestWorkspace, receiver: Receiver, id: string): Promise<ReceivedRequest[]> => {
  const before = receiver.requests.length;
  const tested = await ws.api('POST', `/api/v1/webhooks/${id}/test`);
  expect(tested.body).to.include({ delivered: true });
  const event = await emit(test, ws.workspaceId);
  await eventually('the event delivered', () => requestsFor(receiver.requests.slice(before), event.id).length === 1);
  const received = receiver.requests.slice(before);
  expect(header(received[0] as ReceivedRequest, 'x-webhook-signature')).to.equal(tested.body.signature_header);
  return received;
};

describe('webhook secret rotation with a grace period (e2e, official standardwebhooks library)', function () {
  this.timeout(60_000);
  let test: TestService;
  let ws: TestWorkspace;
  let receiver: Receiver;

  const rotate = (id: string, body?: unknown, headers?: Record<string, string>): Promise<Reply> => ws.api('POST', `/api/v1/webhooks/${id}/secret/rotate`, body, headers);
  const rotated = async (id: string, body?: unknown): Promise<Rotation> => {
    const reply = await rotate(id, body);
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body as unknown as Rotation;
  };

  beforeEach(async () => {
    receiver = await startReceiver();
    receiver.respond({ kind: 'status', status: 204 });
  });
  afterEach(async () => {
    await receiver.close();
    await test?.close();
  });

  describe('on one server', () => {
    beforeEach(async () => {
      test = await startTestService(FAST_RETRIES);
      ws = await test.createWorkspace();
    });

    it('answers a new secret once, in the whsec_ form, with the end of a 24 h grace period by default', async () => {
      const { id, secret } = await subscribe(ws, receiver.url);
      const before = Date.now();
      const rotation = await rotated(id);
      expect(Object.keys(rotation).sort()).to.deep.equal(['previous_secret_expires_at', 'secret', 'webhook_id']);
      expect(rotation.webhook_id).to.equal(id);
      expect(rotation.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/).and.not.equal(secret);
      const expires = Date.parse(`${rotation.previous_secret_expires_at}Z`);
      expect(expires - before).to.be.within(24 * 3600_000 - 60_000, 24 * 3600_000 + 60_000);
      const listed = await ws.api('GET', '/api/v1/webhooks');
      expect(JSON.stringify(listed.body)).to.not.include(rotation.secret).and.not.include(secret);
    });

    it('refuses a grace period that is not an integer from 0 to 7 days (422), and a body that is not an object', async () => {
      const { id } = await subscribe(ws, receiver.url);
      for (const grace of [604_801, -1, 1.5, '60', null]) {
        const reply = await rotate(id, { grace_period_seconds: grace });
        expect(reply.status, JSON.stringify(grace)).to.equal(422);
        expect(reply.body).to.have.nested.property('detail');
        expect(JSON.stringify(reply.body)).to.include('grace_period_seconds');
      }
      expect((await rotate(id, [3600])).status).to.equal(422);
      expect((await rotate(id, { grace_period_seconds: 604_800 })).status).to.equal(200);
      expect((await rotate(id, { grace_period_seconds: 0 })).status).to.equal(200);
    });

    it("is 404 for another workspace's, a deleted or an unknown subscription, which keep their secrets", async () => {
      const { id, secret } = await subscribe(ws, receiver.url);
      const other = await test.createWorkspace();
      expect((await other.api('POST', `/api/v1/webhooks/${id}/secret/rotate`, {})).status).to.equal(404);
      expect((await rotate('whk_unknown', {})).status).to.equal(404);
      const [request] = await deliveries(test, ws, receiver, id);
      expect(checked(request as ReceivedRequest, [secret])).to.deep.equal([{ standard: 'ok', contract: true }]);
      const gone = await subscribe(ws, receiver.url);
      expect((await ws.api('DELETE', `/api/v1/webhooks/${gone.id}`)).status).to.equal(204);
      const reply = await rotate(gone.id, {});
      expect(reply.status).to.equal(404);
      expect(reply.body).to.deep.equal({ detail: 'Webhook not found' });
    });

    it('signs with the old secret before; with both during the grace period (old verifier AND new verifier pass), X-Webhook-Signature still with the old one', async () => {
      const { id, secret: old } = await subscribe(ws, receiver.url);
      for (const request of await deliveries(test, ws, receiver, id)) expect(checked(request, [old])).to.deep.equal([{ standard: 'ok', contract: true }]);
      const { secret: fresh } = await rotated(id, { grace_period_seconds: 3600 });
      for (const request of await deliveries(test, ws, receiver, id)) {
        expect(header(request, 'webhook-signature').split(' ')).to.have.length(2);
        expect(checked(request, [old, fresh])).to.deep.equal([
          { standard: 'ok', contract: true },
          { standard: 'ok', contract: false },
        ]);
      }
    });

    it('after the grace period only the new secret signs, X-Webhook-Signature included; the old verifier refuses', async () => {
      const { id, secret: old } = await subscribe(ws, receiver.url);
      const rotation = await rotated(id, { grace_period_seconds: 1 });
      await eventually('the grace period over', () => Date.now() > Date.parse(`${rotation.previous_secret_expires_at}Z`) + 50);
      for (const request of await deliveries(test, ws, receiver, id)) {
        expect(header(request, 'webhook-signature').split(' ')).to.have.length(1);
        expect(verdictOf(new Webhook(old), request)).to.deep.equal(NOT_SIGNED);
        expect(checked(request, [old, rotation.secret])).to.deep.equal([
          { standard: 'refused', contract: false },
          { standard: 'ok', contract: true },
        ]);
      }
    });

    it('a second rotation during a grace period ends the oldest secret at once: the middle and the newest sign', async () => {
      const { id, secret: first } = await subscribe(ws, receiver.url);
      const { secret: second } = await rotated(id, { grace_period_seconds: 3600 });
      const { secret: third } = await rotated(id, { grace_period_seconds: 3600 });
      for (const request of await deliveries(test, ws, receiver, id)) {
        expect(checked(request, [first, second, third])).to.deep.equal([
          { standard: 'refused', contract: false },
          { standard: 'ok', contract: true },
          { standard: 'ok', contract: false },
        ]);
      }
    });

    it('answers a retry with the same Idempotency-Key with the same secret, rotating once, without recording the secret in clear', async () => {
      const { id } = await subscribe(ws, receiver.url);
      const key = { 'Idempotency-Key': `rotate-${id}` };
      const first = await rotate(id, { grace_period_seconds: 60 }, key);
      const again = await rotate(id, { grace_period_seconds: 60 }, key);
      expect(first.status).to.equal(200);
      expect(again.status).to.equal(200);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      const events = await test.service.core.log.readStream(subscriptionStream(id));
      expect(events.filter((e) => e.type === SUBSCRIPTION_EVENTS.secretRotated)).to.have.length(1);
      // Still that rotation's answer after another one; another request with the key is refused.
      await rotated(id, { grace_period_seconds: 60 });
      expect((await rotate(id, { grace_period_seconds: 60 }, key)).body).to.deep.equal(first.body);
      expect((await rotate(id, { grace_period_seconds: 61 }, key)).status).to.equal(422);
      const everything = await test.service.core.log.readAll({ after: 0, limit: 100_000 });
      expect(JSON.stringify(everything)).to.not.include(String(first.body.secret).slice('whsec_'.length));
    });

    it('the retry of an answered rotation whose subscription was deleted since gets the first answer, and acts on nothing', async () => {
      const { id } = await subscribe(ws, receiver.url);
      const key = { 'Idempotency-Key': `rotate-deleted-${id}` };
      const first = await rotate(id, {}, key);
      expect(first.status).to.equal(200);
      expect((await ws.api('DELETE', `/api/v1/webhooks/${id}`)).status).to.equal(204);
      // As every keyed POST: the first answer within 24 h, replayed from its (sealed) record.
      const again = await rotate(id, {}, key);
      expect(again.status).to.equal(200);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(first.body);
      expect((await ws.api('GET', '/api/v1/webhooks')).body.items.map((w: { id: string }) => w.id)).to.not.include(id);
    });
  });

  it('a retry scheduled before the rotation is signed, when sent after it, with the secrets valid then', async () => {
    test = await startTestService({ WEBHOOK_RETRY_DELAYS: '2s,20ms,20ms,20ms,20ms' });
    ws = await test.createWorkspace();
    const { id, secret: old } = await subscribe(ws, receiver.url);
    receiver.respondOnce({ kind: 'status', status: 500 });
    const event = await emit(test, ws.workspaceId);
    const [first] = await receiver.waitForRequests(1);
    const { secret: fresh } = await rotated(id, { grace_period_seconds: 3600 });
    // The retry is still waiting when the rotation is answered (the premise of this test).
    expect(requestsFor(receiver.requests, event.id)).to.have.length(1);
    const [, retry] = await receiver.waitForRequests(2);
    expect(header(retry as ReceivedRequest, 'x-webhook-attempt')).to.equal('2');
    expect(eventIdOf(retry as ReceivedRequest)).to.equal(eventIdOf(first as ReceivedRequest));
    expect(checked(first as ReceivedRequest, [old, fresh])).to.deep.equal([
      { standard: 'ok', contract: true },
      { standard: 'refused', contract: false },
    ]);
    expect(checked(retry as ReceivedRequest, [old, fresh])).to.deep.equal([
      { standard: 'ok', contract: true },
      { standard: 'ok', contract: false },
    ]);
  });

  it('the rotated secrets and their grace period survive a restart', async () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-rotate-'));
    try {
      test = await startTestService(FAST_RETRIES, { dataDir });
      ws = await test.createWorkspace();
      const { id, secret: old } = await subscribe(ws, receiver.url);
      const { secret: fresh } = await rotated(id, { grace_period_seconds: 3600 });
      await test.close();
      test = await startTestService(FAST_RETRIES, { dataDir });
      const restarted: TestWorkspace = { ...ws, api: (method, p, body, headers) => call(`${test.url}${p}`, method, ws.apiKey, body, headers) };
      for (const request of await deliveries(test, restarted, receiver, id)) {
        expect(checked(request, [old, fresh])).to.deep.equal([
          { standard: 'ok', contract: true },
          { standard: 'ok', contract: false },
        ]);
      }
    } finally {
      await test.close();
      test = undefined as unknown as TestService;
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
