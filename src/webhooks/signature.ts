// Webhook signatures (spec "Authentication": deliveries): HMAC-SHA256 over the raw body bytes, keyed
// with the subscription secret, lowercase hex, prefixed `sha256=`. verifySignature is the helper we
// document for receivers: it must be given the body exactly as received, before any JSON parsing.
import { createHmac, timingSafeEqual } from 'node:crypto';

const PREFIX = 'sha256=';
const HEADER = /^sha256=([0-9a-fA-F]{64})$/;

const digest = (secret: string, body: Buffer | string): Buffer => createHmac('sha256', secret).update(body).digest();

/** The X-Webhook-Signature value for these exact bytes. */
export const sign = (secret: string, body: Buffer): string => `${PREFIX}${digest(secret, body).toString('hex')}`;

/** True when `header` is the signature of `rawBody`; compares the digests in constant time. */
export const verifySignature = (secret: string, rawBody: Buffer | string, header: string | undefined): boolean => {
  const sent = HEADER.exec(header?.trim() ?? '')?.[1];
  if (sent === undefined) return false;
  return timingSafeEqual(Buffer.from(sent, 'hex'), digest(secret, rawBody));
};
