import { expect } from 'chai';
import fc from 'fast-check';
import { sign, verifySignature } from '../../src/webhooks/signature.js';

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
});
