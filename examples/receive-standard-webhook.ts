// A webhook receiver that checks the Standard Webhooks headers with the official library, which also
// refuses a delivery older than 5 minutes (a replay). Run with `npm i standardwebhooks` then
// `npx tsx receive-standard-webhook.ts` (WEBHOOK_SECRET: the whsec_… secret, PORT default 3000).
import { createServer, type IncomingMessage } from 'node:http';
import { Webhook } from 'standardwebhooks';

const secret = process.env['WEBHOOK_SECRET'];
if (secret === undefined || !secret.startsWith('whsec_')) throw new Error('set WEBHOOK_SECRET to the whsec_… secret the subscription was created with');
const hook = new Webhook(secret);
const port = Number(process.env['PORT'] ?? 3000);

const readBody = async (request: IncomingMessage): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
};

createServer(async (request, response) => {
  const raw = await readBody(request); // the body as received, before any JSON.parse
  const headers = Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
  let event: { id: string; type: string };
  try {
    event = hook.verify(raw, headers) as { id: string; type: string };
  } catch (error) {
    console.log(`refused: ${(error as Error).message}`);
    response.writeHead(401).end();
    return;
  }
  console.log(`verified ${event.type} ${event.id} (webhook-id ${headers['webhook-id']})`);
  response.writeHead(204).end();
}).listen(port, () => console.log(`listening on http://localhost:${port}/webhooks`));
