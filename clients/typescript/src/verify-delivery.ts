#!/usr/bin/env node
// verify-delivery < delivery.json
// Checks a saved delivery: reads {"secrets": [...], "body_base64": "...", "headers": {...}} (the shape
// of the shared test vectors; "now" in Unix seconds is optional) on stdin, prints what each scheme
// says and the parsed event as JSON, and exits 0 only when both signatures verify and the body parses.
import { text } from 'node:stream/consumers';
import { parseEvent } from './event.js';
import { verifySignature, verifyStandard, WebhookVerificationError } from './signature.js';

interface Delivery {
  readonly secrets: string[];
  readonly body_base64: string;
  readonly headers: Record<string, string>;
  readonly now?: number;
}

const outcome = (verify: () => void): string => {
  try {
    verify();
    return 'valid';
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.reason;
    throw error;
  }
};

const delivery = JSON.parse(await text(process.stdin)) as Delivery;
const body = Buffer.from(delivery.body_base64, 'base64');
const headers = Object.fromEntries(Object.entries(delivery.headers).map(([k, v]) => [k.toLowerCase(), v]));
const result = {
  x_webhook_signature: outcome(() => verifySignature(body, headers['x-webhook-signature'], delivery.secrets)),
  standard_webhooks: outcome(() => verifyStandard(body, headers, delivery.secrets, delivery.now === undefined ? {} : { now: delivery.now })),
  event: ((): Record<string, string> => {
    try {
      const event = parseEvent(body);
      return { id: event.id, type: event.type };
    } catch (error) {
      return { error: (error as Error).message };
    }
  })(),
};
console.log(JSON.stringify(result));
process.exitCode = result.x_webhook_signature === 'valid' && result.standard_webhooks === 'valid' && !('error' in result.event) ? 0 : 1;
