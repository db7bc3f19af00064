// The shared vectors (clients/test-vectors.json), made with the server's signing code.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import { verifySignature, verifyStandard, WebhookVerificationError } from '../src/index.js';

interface Vector {
  name: string;
  scheme: 'x-webhook-signature' | 'standard-webhooks';
  secrets: string[];
  body_base64: string;
  headers: Record<string, string>;
  now: number;
  valid: boolean;
  error?: string;
}

const file = JSON.parse(readFileSync(new URL('../../test-vectors.json', import.meta.url), 'utf8')) as { tolerance_seconds: number; vectors: Vector[] };

const check = (v: Vector): void => {
  const body = Buffer.from(v.body_base64, 'base64');
  if (v.scheme === 'x-webhook-signature') verifySignature(body, v.headers['x-webhook-signature'], v.secrets);
  else verifyStandard(body, v.headers, v.secrets, { now: v.now, toleranceSeconds: file.tolerance_seconds });
};

describe('shared test vectors', () => {
  test('hold valid and invalid cases of both schemes', () => {
    for (const scheme of ['x-webhook-signature', 'standard-webhooks']) {
      assert.ok(file.vectors.some((v) => v.scheme === scheme && v.valid));
      assert.ok(file.vectors.some((v) => v.scheme === scheme && !v.valid));
    }
  });
  for (const v of file.vectors) {
    test(`${v.scheme}: ${v.name} → ${v.valid ? 'valid' : `refused (${v.error})`}`, () => {
      if (v.valid) return check(v);
      assert.throws(() => check(v), (e: unknown) => e instanceof WebhookVerificationError && e.reason === v.error);
    });
  }
  test('a body given as a string verifies as its UTF-8 bytes', () => {
    const unicode = file.vectors.find((v) => v.scheme === 'standard-webhooks' && v.name === 'unicode body')!;
    verifyStandard(Buffer.from(unicode.body_base64, 'base64').toString('utf8'), unicode.headers, unicode.secrets, { now: unicode.now });
  });
  test('the default tolerance is 5 minutes, against the system clock', () => {
    const good = file.vectors.find((v) => v.scheme === 'standard-webhooks' && v.name === 'good signature')!;
    assert.throws(() => verifyStandard(Buffer.from(good.body_base64, 'base64'), good.headers, good.secrets, { now: good.now + 301 }), /300 s/);
    verifyStandard(Buffer.from(good.body_base64, 'base64'), good.headers, good.secrets, { now: good.now + 300 });
    // The vectors' clock is in the past: the system clock refuses them.
    assert.throws(() => verifyStandard(Buffer.from(good.body_base64, 'base64'), good.headers, good.secrets), WebhookVerificationError);
  });
  test('headers are found whatever their case, and in a fetch Headers', () => {
    const good = file.vectors.find((v) => v.scheme === 'standard-webhooks' && v.name === 'good signature')!;
    const body = Buffer.from(good.body_base64, 'base64');
    const upper = Object.fromEntries(Object.entries(good.headers).map(([k, v]) => [k.toUpperCase(), v]));
    verifyStandard(body, upper, good.secrets, { now: good.now });
    verifyStandard(body, new Headers(good.headers), good.secrets, { now: good.now });
    assert.throws(() => verifyStandard(body, new Headers(), good.secrets, { now: good.now }), (e: unknown) => (e as WebhookVerificationError).reason === 'headers');
  });
});
