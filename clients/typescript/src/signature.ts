// Webhook verification, over the body bytes exactly as received (before any JSON parsing: a
// re-serialised body has another signature). Both schemes the server signs every delivery with:
// - X-Webhook-Signature: `sha256=<hex HMAC-SHA256 of the body>`, keyed with the secret string as written;
// - Standard Webhooks: `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256 of
//   "<webhook-id>.<webhook-timestamp>.<body>">`, keyed with the base64 decoding of the secret after
//   `whsec_`; several during a secret rotation, any valid one passes, other versions are ignored.
// Digests are compared in constant time.
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Why a delivery was refused: a header is missing or malformed, no signature matches, or the timestamp is outside the tolerance. */
export type VerificationFailure = 'headers' | 'signature' | 'timestamp';

export class WebhookVerificationError extends Error {
  constructor(
    readonly reason: VerificationFailure,
    message: string,
  ) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

/** Node's IncomingHttpHeaders (lower-case names), a fetch Headers, or a plain object. */
export type HeadersLike = { get(name: string): string | null } | Readonly<Record<string, string | readonly string[] | undefined>>;

export const DEFAULT_TOLERANCE_SECONDS = 300;

export interface StandardOptions {
  /** How far the timestamp may lie from `now`, in the past or the future: 300 s by default. */
  readonly toleranceSeconds?: number;
  /** The receiver's clock in Unix seconds; the system clock by default. */
  readonly now?: number;
}

type Body = Uint8Array | string;
type Secrets = string | readonly string[];

const header = (headers: HeadersLike, name: string): string | undefined => {
  if (typeof headers.get === 'function') return (headers as { get(name: string): string | null }).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | readonly string[] | undefined>>;
  const value = record[name] ?? Object.entries(record).find(([key]) => key.toLowerCase() === name)?.[1];
  return typeof value === 'string' ? value : value?.[0];
};

const list = (secrets: Secrets): readonly string[] => (typeof secrets === 'string' ? [secrets] : secrets);

const equal = (a: Buffer, b: Buffer): boolean => a.length === b.length && timingSafeEqual(a, b);

const CONTRACT_HEADER = /^sha256=([0-9a-fA-F]{64})$/;

/** Checks X-Webhook-Signature against the body with any of the secrets (the previous one too, during a rotation); throws WebhookVerificationError. */
export const verifySignature = (body: Body, signature: string | undefined | null, secrets: Secrets): void => {
  if (signature === undefined || signature === null || signature.trim() === '') throw new WebhookVerificationError('headers', 'X-Webhook-Signature is missing');
  const hex = CONTRACT_HEADER.exec(signature.trim())?.[1];
  if (hex === undefined) throw new WebhookVerificationError('signature', 'X-Webhook-Signature is not sha256=<64 hex digits>');
  const sent = Buffer.from(hex, 'hex');
  if (!list(secrets).some((secret) => equal(sent, createHmac('sha256', secret).update(body).digest()))) {
    throw new WebhookVerificationError('signature', 'X-Webhook-Signature matches none of the secrets');
  }
};

/** The Standard Webhooks key: the base64 (or, for older secrets, base64url) after `whsec_`. */
export const standardKey = (secret: string): Buffer => Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Checks the Standard Webhooks headers against the body with any of the secrets; throws WebhookVerificationError. */
export const verifyStandard = (body: Body, headers: HeadersLike, secrets: Secrets, options: StandardOptions = {}): void => {
  const id = header(headers, 'webhook-id');
  const timestamp = header(headers, 'webhook-timestamp');
  const signatures = header(headers, 'webhook-signature');
  if (id === undefined || timestamp === undefined || signatures === undefined) {
    throw new WebhookVerificationError('headers', 'webhook-id, webhook-timestamp and webhook-signature are all needed');
  }
  if (!/^\d+$/.test(timestamp)) throw new WebhookVerificationError('headers', 'webhook-timestamp is not an integer');
  const now = options.now ?? Math.floor(Date.now() / 1000);
  const tolerance = options.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  if (Math.abs(now - Number(timestamp)) > tolerance) throw new WebhookVerificationError('timestamp', `webhook-timestamp is more than ${tolerance} s from now`);
  const sent = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,') && BASE64.test(s.slice(3)))
    .map((s) => Buffer.from(s.slice(3), 'base64'));
  const matches = list(secrets).some((secret) => {
    const expected = createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.`).update(body).digest();
    return sent.some((signature) => equal(signature, expected));
  });
  if (!matches) throw new WebhookVerificationError('signature', 'no v1 signature in webhook-signature matches the secrets');
};
