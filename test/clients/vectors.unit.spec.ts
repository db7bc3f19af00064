// The shared vectors (clients/test-vectors.json) say what the server and the Standard Webhooks
// reference library say: the contract's vectors by the server's own verifier, the Standard Webhooks
// signatures by the official `standardwebhooks` library (its clock is the system's, so the timestamp
// rule is checked by the helpers' own suites, against each vector's `now`).
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Webhook } from 'standardwebhooks';
import { verifySignature } from '../../src/webhooks/signature.js';
import type { Vector } from '../../scripts/clients/vectors.js';

const file = JSON.parse(readFileSync(path.resolve(import.meta.dirname, '../../clients/test-vectors.json'), 'utf8')) as { vectors: Vector[] };
const of = (scheme: Vector['scheme']): Vector[] => file.vectors.filter((v) => v.scheme === scheme);
const bodyOf = (v: Vector): Buffer => Buffer.from(v.body_base64, 'base64');

/** The official library reads only standard base64 after whsec_: an older base64url secret is spelled anew. */
const officialSecret = (secret: string): string => {
  const key = secret.slice('whsec_'.length).replaceAll('-', '+').replaceAll('_', '/');
  return `whsec_${key}${'='.repeat((4 - (key.length % 4)) % 4)}`;
};

/** Whether one of the header's v1 signatures is the official library's for one of the secrets. */
const officiallySigned = (v: Vector): boolean => {
  const sent = (v.headers['webhook-signature'] ?? '').split(' ');
  const at = new Date(Number(v.headers['webhook-timestamp']) * 1000);
  return v.secrets.some((secret) => {
    let hook: Webhook;
    try {
      hook = new Webhook(officialSecret(secret));
    } catch {
      return false; // a secret the library cannot read signs nothing
    }
    return sent.includes(hook.sign(v.headers['webhook-id'] ?? '', at, bodyOf(v)));
  });
};

describe('client helpers: the shared test vectors (unit)', () => {
  it("each X-Webhook-Signature vector's outcome is the server verifier's", () => {
    for (const v of of('x-webhook-signature')) {
      const verified = v.secrets.some((secret) => verifySignature(secret, bodyOf(v), v.headers['x-webhook-signature']));
      expect(verified, v.name).to.equal(v.valid);
    }
  });

  it('a Standard Webhooks vector carries an official signature exactly when it is valid or refused only for its time', () => {
    const checked = of('standard-webhooks').filter((v) => v.error !== 'headers');
    expect(checked.filter((v) => v.valid)).to.have.length.above(5);
    for (const v of checked) expect(officiallySigned(v), v.name).to.equal(v.valid || v.error === 'timestamp');
  });
});
