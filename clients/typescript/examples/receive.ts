// Receive your first webhook: verifies each delivery, prints its event, answers 204 (401 when forged).
//   WEBHOOK_SECRET=whsec_… PORT=3000 npx tsx receive.ts
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventParseError, WebhookVerificationError, isEvent, receive } from '@support-platform/client';

const secret = process.env['WEBHOOK_SECRET'] ?? ''; // the secret POST /api/v1/webhooks answered

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    try {
      // The bytes as received, before any JSON parsing: a re-serialised body has another signature.
      const event = receive(Buffer.concat(chunks), req.headers, secret);
      if (isEvent(event, 'ticket.created')) console.log(`new ticket ${event.data.ticket_id}: ${event.data.subject ?? '(no subject)'}`);
      console.log(`${event.type} ${event.id}`);
      res.writeHead(204).end();
    } catch (error) {
      if (!(error instanceof WebhookVerificationError || error instanceof EventParseError)) throw error;
      console.log(`refused: ${error.message}`);
      res.writeHead(error instanceof WebhookVerificationError ? 401 : 400).end();
    }
  });
});
server.listen(Number(process.env['PORT'] ?? 3000), '127.0.0.1', () => {
  console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`);
});
