// A webhook receiver: verifies X-Webhook-Signature over the raw body, then handles the event.
// Node.js built-ins only; run with `npx tsx receive-webhook.ts` (WEBHOOK_SECRET set, PORT default 3000).
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';

const secret = process.env['WEBHOOK_SECRET'];
if (secret === undefined || secret === '') throw new Error('set WEBHOOK_SECRET to the subscription secret (or the one listen printed)');
const port = Number(process.env['PORT'] ?? 3000);

/** True when `header` is `sha256=<hex HMAC-SHA256 of rawBody>`; compares in constant time. */
export const verifySignature = (key: string, rawBody: Buffer, header: string | undefined): boolean => {
  const sent = /^sha256=([0-9a-f]{64})$/i.exec(header?.trim() ?? '')?.[1];
  if (sent === undefined) return false;
  const expected = createHmac('sha256', key).update(rawBody).digest();
  return timingSafeEqual(Buffer.from(sent, 'hex'), expected);
};

const readBody = async (request: IncomingMessage): Promise<Buffer> => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
};

interface Envelope {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly workspace_id: string;
  readonly data: Record<string, unknown>;
  readonly _links: Record<string, string>;
}

const seen = new Set<string>(); // deliveries are at least once: drop repeats by the event id

createServer(async (request, response) => {
  const raw = await readBody(request); // the bytes as received, before any JSON.parse
  const signature = request.headers['x-webhook-signature'];
  if (!verifySignature(secret, raw, Array.isArray(signature) ? signature[0] : signature)) {
    response.writeHead(401).end();
    return;
  }
  const event = JSON.parse(raw.toString('utf8')) as Envelope;
  if (!seen.has(event.id)) {
    seen.add(event.id);
    console.log(`verified ${event.type} ${event.id} at ${event.timestamp}: ${JSON.stringify(event.data)}`);
  }
  response.writeHead(204).end(); // answer 2xx within 10 s; do slow work after answering
}).listen(port, () => console.log(`listening on http://localhost:${port}/webhooks`));
