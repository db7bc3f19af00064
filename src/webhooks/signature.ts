// Webhook signatures, two schemes over the same raw body bytes.
//
// The contract's (spec "Authentication": deliveries): HMAC-SHA256 over the raw body, keyed with the
// subscription secret as it is written (its UTF-8 bytes), lowercase hex, prefixed `sha256=`, sent as
// X-Webhook-Signature. verifySignature is the helper we document for receivers: it must be given the
// body exactly as received, before any JSON parsing.
//
// Standard Webhooks (standardwebhooks.com, spec v1.0.0, "v1" symmetric): HMAC-SHA256 over
// `<webhook-id>.<webhook-timestamp>.<body>`, base64, prefixed `v1,`, sent as webhook-signature. Its
// key follows the standard's `whsec_` convention: the base64 decoding of what follows `whsec_`, so a
// receiver gives the official libraries the secret exactly as creation answered it. (Secrets from
// before this scheme are base64url; the decoding here reads both alphabets.)
//
// During a rotation's grace period (domain/subscription/subscription.ts) webhook-signature carries one
// `v1,` signature per valid secret, space separated, newest first, as the standard allows; the
// contract's single X-Webhook-Signature stays with the replaced secret until the period ends.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { contractSecret, validSecrets, type PreviousSecret } from '../domain/subscription/subscription.js';

const PREFIX = 'sha256=';
const HEADER = /^sha256=([0-9a-fA-F]{64})$/;
const STANDARD_PREFIX = 'whsec_';

const digest = (secret: string, body: Buffer | string): Buffer => createHmac('sha256', secret).update(body).digest();

/** The X-Webhook-Signature value for these exact bytes. */
export const sign = (secret: string, body: Buffer): string => `${PREFIX}${digest(secret, body).toString('hex')}`;

/** True when `header` is the signature of `rawBody`; compares the digests in constant time. */
export const verifySignature = (secret: string, rawBody: Buffer | string, header: string | undefined): boolean => {
  const sent = HEADER.exec(header?.trim() ?? '')?.[1];
  if (sent === undefined) return false;
  return timingSafeEqual(Buffer.from(sent, 'hex'), digest(secret, rawBody));
};

/** The Standard Webhooks key bytes of a subscription secret: base64 after the `whsec_` prefix. */
export const standardKey = (secret: string): Buffer =>
  Buffer.from(secret.startsWith(STANDARD_PREFIX) ? secret.slice(STANDARD_PREFIX.length) : secret, 'base64');

/** The webhook-signature value (`v1,<base64>`) of a message id, a send time in Unix seconds and the body bytes. */
export const signStandard = (key: Buffer, messageId: string, timestampSeconds: number, body: Buffer): string =>
  `v1,${createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.`).update(body).digest('base64')}`;

/** A subscription's secrets in clear: the current one, and the one its last rotation replaced. */
export interface SigningSecrets {
  readonly current: string;
  readonly previous: PreviousSecret | null;
}

/** The two signature headers of one attempt sent at `sentAtMicros`, with the secrets valid then. */
export const signatureHeaders = (secrets: SigningSecrets, messageId: string, sentAtMicros: number, body: Buffer) => {
  const seconds = Math.floor(sentAtMicros / 1_000_000);
  return {
    contract: sign(contractSecret(secrets.current, secrets.previous, sentAtMicros), body),
    standard: validSecrets(secrets.current, secrets.previous, sentAtMicros)
      .map((secret) => signStandard(standardKey(secret), messageId, seconds, body))
      .join(' '),
  };
};
