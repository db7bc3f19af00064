// A webhook delivered by a running service, saved as its raw bytes and headers, verified by each
// language's helper (clients/*: verify-delivery, which verifies both signatures and parses the event).
import { expect } from 'chai';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { LANGUAGES, buildGo, runProgram, verifyDelivery } from '../support/client-helpers.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/server.js';
import { header, subscribe } from '../support/webhooks-dispatch.js';

interface SavedDelivery {
  readonly secrets: string[];
  readonly body_base64: string;
  readonly headers: Record<string, string>;
  readonly now?: number;
}

const SAVED_HEADERS = ['content-type', 'x-webhook-signature', 'x-webhook-event', 'x-webhook-id', 'webhook-id', 'webhook-timestamp', 'webhook-signature'];

describe('client helpers verify a delivery of a running service (e2e: TypeScript, Python, Go)', function () {
  this.timeout(180_000);
  let test: TestService;
  let receiver: Receiver;
  let dir: string;
  let goBinary: string;
  /** The delivery as the receiver got it, written to a file as raw bytes (base64) and headers. */
  let saved: SavedDelivery;
  let eventId: string;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-clients-'));
    const built = await buildGo(dir, './cmd/verify-delivery');
    goBinary = built['./cmd/verify-delivery'] as string;
    test = await startTestService();
    receiver = await startReceiver();
    const ws = await test.createWorkspace();
    const { secret } = await subscribe(ws, receiver.url, ['ticket.created']);
    // Non-ASCII in the body: the helpers must verify the bytes, not a decoding of them.
    const created = await ws.api('POST', '/api/v1/tickets', { subject: 'Принтер горит 🔥 — ça brûle', contact: { email: 'zoë@example.com' } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const [request] = await receiver.waitForRequests(1);
    if (request === undefined) throw new Error('no delivery');
    saved = {
      secrets: [secret],
      body_base64: request.body.toString('base64'),
      headers: Object.fromEntries(SAVED_HEADERS.map((name) => [name, header(request, name)])),
    };
    writeFileSync(path.join(dir, 'delivery.json'), JSON.stringify(saved));
    eventId = String(JSON.parse(request.body.toString('utf8')).id);
  });
  after(async () => {
    await receiver?.close();
    await test?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const verify = async (language: (typeof LANGUAGES)[number], delivery: SavedDelivery) => {
    const result = await runProgram(verifyDelivery(language, goBinary), JSON.stringify(delivery));
    expect(result.stderr, `${language} wrote to stderr`).to.equal('');
    return { code: result.code, outcome: JSON.parse(result.stdout) as { x_webhook_signature: string; standard_webhooks: string; event: Record<string, string> } };
  };

  for (const language of LANGUAGES) {
    it(`${language}: both signatures of the saved delivery verify and its event parses`, async () => {
      const delivery = JSON.parse(readFileSync(path.join(dir, 'delivery.json'), 'utf8')) as SavedDelivery;
      const { code, outcome } = await verify(language, delivery);
      expect(outcome).to.deep.include({ x_webhook_signature: 'valid', standard_webhooks: 'valid' });
      expect(outcome.event).to.include({ id: eventId, type: 'ticket.created' });
      if (language !== 'typescript') expect(outcome.event['typed']).to.equal('TicketCreatedData');
      expect(code).to.equal(0);
    });

    it(`${language}: the same delivery with one byte changed, another secret or replayed 6 minutes later is refused`, async () => {
      const body = Buffer.from(saved.body_base64, 'base64');
      const at = body.indexOf('ticket_id');
      body.writeUInt8(body.readUInt8(at) ^ 0x20, at); // ticket_id → Ticket_id
      const tampered = await verify(language, { ...saved, body_base64: body.toString('base64') });
      expect(tampered.outcome).to.include({ x_webhook_signature: 'signature', standard_webhooks: 'signature' });
      expect(tampered.code).to.equal(1);

      const other = await verify(language, { ...saved, secrets: ['whsec_' + Buffer.alloc(32, 7).toString('base64')] });
      expect(other.outcome).to.include({ x_webhook_signature: 'signature', standard_webhooks: 'signature' });
      expect(other.code).to.equal(1);

      // X-Webhook-Signature carries no time: only the Standard Webhooks timestamp stops a replay.
      const replayed = await verify(language, { ...saved, now: Number(saved.headers['webhook-timestamp']) + 360 });
      expect(replayed.outcome).to.include({ x_webhook_signature: 'valid', standard_webhooks: 'timestamp' });
      expect(replayed.code).to.equal(1);
    });
  }
});
