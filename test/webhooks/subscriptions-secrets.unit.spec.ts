import { expect } from 'chai';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { KEY_FILE, createSecretBox, loadSecretKey, newWebhookSecret } from '../../src/webhooks/secrets.js';

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

  it('refuses a damaged key file', () => {
    writeFileSync(path.join(dataDir, KEY_FILE), 'not a key');
    expect(() => loadSecretKey({ secretKey: null, dataDir })).to.throw(/256-bit key/);
  });
});
