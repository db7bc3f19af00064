// The shared test vectors of the verification helpers (clients/test-vectors.json): every signature in
// them is made by the server's own signing code (src/webhooks/signature.ts), and every expected
// outcome of the contract's scheme is the server's own verifySignature's, so a helper that passes
// them agrees with what the server sends. Secrets, ids and clocks are fixed: the file is a pure
// function of the signing code and regenerates byte for byte.
import { createHash } from 'node:crypto';
import { sign, signStandard, standardKey, verifySignature } from '../../src/webhooks/signature.js';

/** Both schemes' names as the vectors spell them. */
export type Scheme = 'x-webhook-signature' | 'standard-webhooks';
/** Why a vector is refused: the signature matches no secret, the timestamp is outside the tolerance, or a header is missing or malformed. */
export type Refusal = 'signature' | 'timestamp' | 'headers';

export interface Vector {
  readonly name: string;
  readonly scheme: Scheme;
  /** The receiver's secrets (several during a rotation): any one may match. */
  readonly secrets: readonly string[];
  /** The body bytes exactly as sent, base64: the helpers verify bytes, never parsed JSON. */
  readonly body_base64: string;
  readonly headers: Readonly<Record<string, string>>;
  /** The receiver's clock, Unix seconds. */
  readonly now: number;
  readonly valid: boolean;
  readonly error?: Refusal;
}

export const TOLERANCE_SECONDS = 300;
const NOW = 1_767_225_600; // 2026-01-01T00:00:00Z
// 32 fixed key bytes per secret, shaped as the server makes them (src/webhooks/secrets.ts).
const keyBytes = (seed: string): Buffer => createHash('sha256').update(seed).digest();
const SECRET = `whsec_${keyBytes('current').toString('base64')}`;
const NEW_SECRET = `whsec_${keyBytes('new').toString('base64')}`;
const OTHER_SECRET = `whsec_${keyBytes('other').toString('base64')}`;
/** A secret from before the Standard Webhooks scheme: base64url, no padding. */
const LEGACY_SECRET = `whsec_${keyBytes('legacy').toString('base64url')}`;
const MESSAGE_ID = 'b4c5d0a3e2f1465c9d8e7f6a5b4c3d2e';

const BODY = Buffer.from(
  '{"id":"9f2c4a7e1b3d4c5e8f6a7b8c9d0e1f2a","type":"ticket.created","timestamp":"2025-12-31T23:59:58.123456+00:00",' +
    '"workspace_id":"07a97c4f6143b46a6a7126bee785b69f","data":{"ticket_id":"5d1e","status":"new","priority":"normal",' +
    '"contact_id":"c0a1","subject":"Printer on fire"},"_links":{"ticket":"/api/v1/tickets/5d1e","messages":"/api/v1/tickets/5d1e/messages"}}',
);
const UNICODE_BODY = Buffer.from(
  '{"id":"1a2b","type":"message.created","data":{"content":"Привет 👋 — ça marche? \\u00e9 \u00e9 日本語","sender_name":"Zoë"}}',
);
const EMPTY_BODY = Buffer.alloc(0);

const b64 = (body: Buffer): string => body.toString('base64');

const contract = (name: string, secrets: readonly string[], body: Buffer, header: string | undefined, note?: Refusal): Vector => {
  // The expectation is the server's own verifier's, with any of the receiver's secrets.
  const valid = secrets.some((secret) => verifySignature(secret, body, header));
  if ((note === undefined) !== valid) throw new Error(`vector "${name}": the server's verifier says ${valid ? 'valid' : 'invalid'}`);
  return {
    name,
    scheme: 'x-webhook-signature',
    secrets,
    body_base64: b64(body),
    headers: header === undefined ? {} : { 'x-webhook-signature': header },
    now: NOW,
    valid,
    ...(valid ? {} : { error: header === undefined ? 'headers' : 'signature' }),
  };
};

const standardSignature = (secret: string, timestamp: number, body: Buffer, id = MESSAGE_ID): string => signStandard(standardKey(secret), id, timestamp, body);

const standard = (
  name: string,
  secrets: readonly string[],
  body: Buffer,
  headers: Record<string, string>,
  error?: Refusal,
): Vector => ({
  name,
  scheme: 'standard-webhooks',
  secrets,
  body_base64: b64(body),
  headers,
  now: NOW,
  valid: error === undefined,
  ...(error === undefined ? {} : { error }),
});

const standardHeaders = (signature: string, timestamp = NOW, id = MESSAGE_ID): Record<string, string> => ({
  'webhook-id': id,
  'webhook-timestamp': String(timestamp),
  'webhook-signature': signature,
});

const tamper = (body: Buffer): Buffer => Buffer.from(body.toString('utf8').replace('Printer on fire', 'Printer on fira'));
const reserialised = (body: Buffer): Buffer => Buffer.from(JSON.stringify(JSON.parse(body.toString('utf8')), null, 2));

const contractVectors = (): Vector[] => [
  contract('good signature', [SECRET], BODY, sign(SECRET, BODY)),
  contract('good signature, hex in upper case', [SECRET], BODY, sign(SECRET, BODY).replace(/[0-9a-f]{64}$/, (hex) => hex.toUpperCase())),
  contract('tampered body', [SECRET], tamper(BODY), sign(SECRET, BODY), 'signature'),
  contract('wrong secret', [OTHER_SECRET], BODY, sign(SECRET, BODY), 'signature'),
  contract('re-serialised JSON', [SECRET], reserialised(BODY), sign(SECRET, BODY), 'signature'),
  contract('unicode body', [SECRET], UNICODE_BODY, sign(SECRET, UNICODE_BODY)),
  contract('empty body', [SECRET], EMPTY_BODY, sign(SECRET, EMPTY_BODY)),
  contract('missing header', [SECRET], BODY, undefined, 'headers'),
  contract('not sha256=', [SECRET], BODY, sign(SECRET, BODY).replace('sha256=', 'sha1='), 'signature'),
  contract('truncated digest', [SECRET], BODY, sign(SECRET, BODY).slice(0, -2), 'signature'),
  // During a rotation X-Webhook-Signature stays signed with the previous secret: a receiver that
  // already holds the new one keeps the old one beside it until the grace period ends.
  contract('rotated secrets: receiver holds new and previous', [NEW_SECRET, SECRET], BODY, sign(SECRET, BODY)),
  contract('rotated secrets: receiver dropped the previous too soon', [NEW_SECRET], BODY, sign(SECRET, BODY), 'signature'),
];

const standardVectors = (): Vector[] => {
  const good = standardSignature(SECRET, NOW, BODY);
  const rotated = `${standardSignature(SECRET, NOW, BODY)} ${standardSignature(NEW_SECRET, NOW, BODY)}`;
  return [
    standard('good signature', [SECRET], BODY, standardHeaders(good)),
    standard('tampered body', [SECRET], tamper(BODY), standardHeaders(good), 'signature'),
    standard('wrong secret', [OTHER_SECRET], BODY, standardHeaders(good), 'signature'),
    standard('re-serialised JSON', [SECRET], reserialised(BODY), standardHeaders(good), 'signature'),
    standard('another message id', [SECRET], BODY, standardHeaders(good, NOW, 'another-id'), 'signature'),
    standard('unicode body', [SECRET], UNICODE_BODY, standardHeaders(standardSignature(SECRET, NOW, UNICODE_BODY))),
    standard('empty body', [SECRET], EMPTY_BODY, standardHeaders(standardSignature(SECRET, NOW, EMPTY_BODY))),
    standard('timestamp at the tolerance, in the past', [SECRET], BODY, standardHeaders(standardSignature(SECRET, NOW - TOLERANCE_SECONDS, BODY), NOW - TOLERANCE_SECONDS)),
    standard('timestamp at the tolerance, in the future', [SECRET], BODY, standardHeaders(standardSignature(SECRET, NOW + TOLERANCE_SECONDS, BODY), NOW + TOLERANCE_SECONDS)),
    // A correct signature of an old message: a replay, refused by its timestamp alone.
    standard('old timestamp', [SECRET], BODY, standardHeaders(standardSignature(SECRET, NOW - TOLERANCE_SECONDS - 1, BODY), NOW - TOLERANCE_SECONDS - 1), 'timestamp'),
    standard('future timestamp', [SECRET], BODY, standardHeaders(standardSignature(SECRET, NOW + TOLERANCE_SECONDS + 1, BODY), NOW + TOLERANCE_SECONDS + 1), 'timestamp'),
    standard('timestamp changed after signing', [SECRET], BODY, standardHeaders(good, NOW - 1), 'signature'),
    standard('timestamp not an integer', [SECRET], BODY, { ...standardHeaders(good), 'webhook-timestamp': `${NOW}.5` }, 'headers'),
    standard('missing webhook-id', [SECRET], BODY, { 'webhook-timestamp': String(NOW), 'webhook-signature': good }, 'headers'),
    standard('missing webhook-signature', [SECRET], BODY, { 'webhook-id': MESSAGE_ID, 'webhook-timestamp': String(NOW) }, 'headers'),
    standard('rotated secrets: two signatures, receiver holds the previous', [SECRET], BODY, standardHeaders(rotated)),
    standard('rotated secrets: two signatures, receiver holds the new', [NEW_SECRET], BODY, standardHeaders(rotated)),
    standard('rotated secrets: two signatures, receiver holds neither', [OTHER_SECRET], BODY, standardHeaders(rotated), 'signature'),
    standard('unknown versions are ignored', [SECRET], BODY, standardHeaders(`v1a,${good.slice(3)} v2,AAAA ${good}`)),
    standard('only unknown versions', [SECRET], BODY, standardHeaders(`v1a,${good.slice(3)} v2,${good.slice(3)}`), 'signature'),
    standard('signature not base64', [SECRET], BODY, standardHeaders('v1,not*base64!'), 'signature'),
    standard('a malformed secret beside the right one', ['whsec_not base64!', SECRET], BODY, standardHeaders(good)),
    standard('legacy base64url secret', [LEGACY_SECRET], BODY, standardHeaders(standardSignature(LEGACY_SECRET, NOW, BODY))),
  ];
};

/** The whole file, as committed. */
export const testVectorsFile = (): string =>
  `${JSON.stringify(
    {
      about:
        'Shared vectors of the webhook verification helpers, generated by `npm run clients:generate` with the server\'s own signing code. ' +
        'Each helper must give `valid` for every vector (and, when invalid, the `error` kind), verifying body_base64 decoded to bytes ' +
        'with the headers, the receiver secrets and `now` as its clock.',
      tolerance_seconds: TOLERANCE_SECONDS,
      vectors: [...contractVectors(), ...standardVectors()],
    },
    null,
    2,
  )}\n`;
