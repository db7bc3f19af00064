import { expect } from 'chai';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { newWebhookSecret } from '../../src/webhooks/secrets.js';
import { sign, signStandard, standardKey, verifySignature } from '../../src/webhooks/signature.js';

describe('webhook signature', () => {
  it('is HMAC-SHA256 in lowercase hex with the sha256= prefix (RFC 4231 style vector)', () => {
    const body = Buffer.from('The quick brown fox jumps over the lazy dog');
    expect(sign('key', body)).to.equal('sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8');
  });

  it('verifies its own signature over bytes or the same text', () => {
    const body = Buffer.from('{"a":"é"}');
    const header = sign('s3cret', body);
    expect(verifySignature('s3cret', body, header)).to.equal(true);
    expect(verifySignature('s3cret', '{"a":"é"}', header)).to.equal(true);
  });

  it('refuses a wrong secret, a missing, malformed or truncated header', () => {
    const body = Buffer.from('{}');
    const header = sign('s3cret', body);
    expect(verifySignature('other', body, header)).to.equal(false);
    expect(verifySignature('s3cret', body, undefined)).to.equal(false);
    expect(verifySignature('s3cret', body, '')).to.equal(false);
    expect(verifySignature('s3cret', body, header.replace('sha256=', 'sha1='))).to.equal(false);
    expect(verifySignature('s3cret', body, header.slice(0, -2))).to.equal(false);
    expect(verifySignature('s3cret', body, `${header}00`)).to.equal(false);
  });

  it('refuses the signature of any altered body', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 256 }), fc.nat(), fc.integer({ min: 1, max: 255 }), (bytes, at, flip) => {
        const body = Buffer.from(bytes);
        const header = sign('k', body);
        const altered = Buffer.from(body);
        const index = at % altered.length;
        altered[index] = (altered[index] as number) ^ flip;
        return verifySignature('k', body, header) && !verifySignature('k', altered, header);
      }),
    );
  });

  describe('Standard Webhooks (v1)', () => {
    // Unix seconds near now: the official library checks the timestamp against its clock.
    const now = () => Math.floor(Date.now() / 1000);
    const headers = (id: string, at: number, signature: string) => ({ 'webhook-id': id, 'webhook-timestamp': String(at), 'webhook-signature': signature });

    it('signs as the official library does, with the key it reads from a new secret as it is', () => {
      const secret = newWebhookSecret();
      expect(secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
      const body = Buffer.from('{"a":"Grüße"}');
      const at = now();
      const ours = signStandard(standardKey(secret), 'd1', at, body);
      expect(ours).to.match(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(ours).to.equal(new Webhook(secret).sign('d1', new Date(at * 1000), body));
      expect(new Webhook(secret).verify(body, headers('d1', at, ours))).to.deep.equal({ a: 'Grüße' });
    });

    it('keys a secret of the earlier base64url form with the same bytes the documented transformation gives the library', () => {
      const rest = Buffer.alloc(32, 0xfb).toString('base64url'); // '-_v7-_v7…': both URL-safe letters, no padding
      const legacy = `whsec_${rest}`;
      const transformed = `whsec_${rest.replace(/-/g, '+').replace(/_/g, '/')}=`;
      const body = Buffer.from('{}');
      const at = now();
      expect(standardKey(legacy)).to.have.length(32);
      expect(() => new Webhook(legacy)).to.throw(); // as it is, the library does not read it
      expect(new Webhook(transformed).verify(body, headers('d1', at, signStandard(standardKey(legacy), 'd1', at, body)))).to.deep.equal({});
    });

    it('is refused by the library for another id, time, key or body', () => {
      const secret = newWebhookSecret();
      const body = Buffer.from('{"n":1}');
      const at = now();
      const signature = signStandard(standardKey(secret), 'd1', at, body);
      const hook = new Webhook(secret);
      expect(() => hook.verify(body, headers('d2', at, signature))).to.throw(/No matching signature/);
      expect(() => hook.verify(body, headers('d1', at - 1, signature))).to.throw(/No matching signature/);
      expect(() => hook.verify(Buffer.from('{"n":2}'), headers('d1', at, signature))).to.throw(/No matching signature/);
      expect(() => new Webhook(newWebhookSecret()).verify(body, headers('d1', at, signature))).to.throw(/No matching signature/);
    });
  });
});
