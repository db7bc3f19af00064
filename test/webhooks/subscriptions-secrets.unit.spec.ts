import { expect } from 'chai';
import { createCipheriv, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { ConfigError } from '../../src/config/config.js';
import { KEY_FILE, createSecretBox, loadSecretKey, newWebhookSecret, secretsDoNotOpen } from '../../src/webhooks/secrets.js';

const A = Buffer.alloc(32, 0xa1);
const B = Buffer.alloc(32, 0xb2);
const C = Buffer.alloc(32, 0xc3);

/** A secret as servers sealed it before key ids: `v1:<base64url(iv|tag|ciphertext)>`. */
const sealV1 = (key: Buffer, secret: string, context: string): string => {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context));
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return `v1:${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url')}`;
};

const keyIdOf = (sealed: string): string | undefined => /^v2:([0-9a-f]{8}):[\w-]+$/.exec(sealed)?.[1];

describe('webhook secrets at rest', () => {
  let dataDir: string;
  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-secrets-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('round-trips, never stores the clear text, and opens only for its own context', () => {
    const box = createSecretBox(loadSecretKey({ secretKey: null, dataDir }));
    const secret = newWebhookSecret();
    const sealed = box.encrypt(secret, 'webhook/w/a');
    expect(sealed).not.to.include(secret);
    expect(box.encrypt(secret, 'webhook/w/a')).not.to.equal(sealed);
    expect(box.decrypt(sealed, 'webhook/w/a')).to.equal(secret);
    expect(() => box.decrypt(sealed, 'webhook/w/b')).to.throw();
  });

  it('generates the key once, in a file only its owner can read, and reuses it', () => {
    const sealed = createSecretBox(loadSecretKey({ secretKey: null, dataDir })).encrypt('s', 'c');
    expect(statSync(path.join(dataDir, KEY_FILE)).mode & 0o777).to.equal(0o600);
    expect(createSecretBox(loadSecretKey({ secretKey: null, dataDir })).decrypt(sealed, 'c')).to.equal('s');
  });

  it('uses WEBHOOK_SECRET_KEY when set, and a different key cannot open the secret', () => {
    const box = createSecretBox(loadSecretKey({ secretKey: 'ab'.repeat(32), dataDir }));
    const sealed = box.encrypt('s', 'c');
    expect(createSecretBox(Buffer.from('ab'.repeat(32), 'hex')).decrypt(sealed, 'c')).to.equal('s');
    expect(() => createSecretBox(loadSecretKey({ secretKey: null, dataDir })).decrypt(sealed, 'c')).to.throw();
  });

  describe('keyring', () => {
    it('seals with the current key under its id: a short fingerprint, the same for one key, not the key', () => {
      const id = keyIdOf(createSecretBox(B, [A]).encrypt('s', 'c'));
      expect(id).to.be.a('string');
      expect(keyIdOf(createSecretBox(B).encrypt('t', 'd'))).to.equal(id);
      expect(keyIdOf(createSecretBox(A, [B]).encrypt('s', 'c'))).not.to.equal(id);
      expect(B.toString('hex')).not.to.include(id);
    });

    it('opens a v1 secret with the current key or any previous one', () => {
      expect(createSecretBox(A).decrypt(sealV1(A, 's', 'c'), 'c')).to.equal('s');
      expect(createSecretBox(B, [C, A]).decrypt(sealV1(A, 's', 'c'), 'c')).to.equal('s');
    });

    it('does not open a v1 secret that no key of the ring sealed', () => {
      expect(() => createSecretBox(B, [C]).decrypt(sealV1(A, 's', 'c'), 'c')).to.throw(/no key/);
    });

    it('opens a v2 secret with the key its id names, previous keys included', () => {
      const sealedByA = createSecretBox(A).encrypt('s', 'c');
      expect(createSecretBox(B, [C, A]).decrypt(sealedByA, 'c')).to.equal('s');
    });

    it('opens a v2 secret only with the key its id names, never by trying the others', () => {
      const sealedByA = createSecretBox(A).encrypt('s', 'c');
      const idOfB = keyIdOf(createSecretBox(B).encrypt('s', 'c'));
      expect(() => createSecretBox(B, [A]).decrypt(sealedByA.replace(/^v2:\w+:/, `v2:${idOfB}:`), 'c')).to.throw(/no key/);
      expect(() => createSecretBox(B, [C]).decrypt(sealedByA, 'c')).to.throw(/no key/);
    });

    it('refuses an altered or unrecognised value', () => {
      const sealed = createSecretBox(A).encrypt('s', 'c');
      const flipped = `${sealed.slice(0, -2)}${sealed.at(-2) === 'A' ? 'B' : 'A'}${sealed.at(-1)}`;
      expect(() => createSecretBox(A).decrypt(flipped, 'c')).to.throw();
      expect(() => createSecretBox(A).decrypt(`v3:${sealed.slice(3)}`, 'c')).to.throw(/unrecognised/);
    });

    it('binds each secret to its context, with any key of the ring and in either format', () => {
      const ring = createSecretBox(B, [A]);
      for (const sealed of [createSecretBox(A).encrypt('s', 'webhook/w/a'), ring.encrypt('s', 'webhook/w/a'), sealV1(A, 's', 'webhook/w/a')]) {
        expect(ring.decrypt(sealed, 'webhook/w/a')).to.equal('s');
        expect(() => ring.decrypt(sealed, 'webhook/w/b')).to.throw();
      }
    });

    it('needs resealing for v1 and for v2 under a previous key, not for v2 under the current key', () => {
      const ring = createSecretBox(B, [A]);
      expect(ring.needsResealing(ring.encrypt('s', 'c'))).to.equal(false);
      expect(ring.needsResealing(createSecretBox(A).encrypt('s', 'c'))).to.equal(true);
      expect(ring.needsResealing(sealV1(B, 's', 'c'))).to.equal(true);
      expect(createSecretBox(A).needsResealing(createSecretBox(A, [B]).encrypt('s', 'c'))).to.equal(false);
    });
  });

  describe('the start-up refusal', () => {
    it('names WEBHOOK_SECRET_KEY, counts the subscriptions and says which keys to set', () => {
      const error = secretsDoNotOpen(2, { secretKey: 'ab'.repeat(32), dataDir });
      expect(error).to.be.instanceOf(ConfigError).with.property('variable', 'WEBHOOK_SECRET_KEY');
      expect(error.message).to.match(/^WEBHOOK_SECRET_KEY: the secrets of 2 webhook subscriptions do not open/);
      expect(error.message).to.include('WEBHOOK_PREVIOUS_SECRET_KEYS').and.not.include(KEY_FILE).and.not.include('ab'.repeat(32));
    });

    it('names the key file when the key came from it', () => {
      const error = secretsDoNotOpen(1, { secretKey: null, dataDir });
      expect(error.message).to.include('the secret of 1 webhook subscription does not open').and.include(path.join(dataDir, KEY_FILE));
    });
  });

  it('refuses a damaged key file', () => {
    writeFileSync(path.join(dataDir, KEY_FILE), 'not a key');
    expect(() => loadSecretKey({ secretKey: null, dataDir })).to.throw(/256-bit key/);
  });
});
