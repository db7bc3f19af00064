// Webhook secrets at rest: AES-256-GCM under a server key, so the log never holds them in clear.
// The key is WEBHOOK_SECRET_KEY (64 hex) or, when unset, one generated on first start and kept in
// `<dataDir>/webhook-secret.key` (mode 0600). Each ciphertext is bound to its subscription (as
// additional authenticated data), so a secret copied onto another subscription does not decrypt.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface SecretBox {
  encrypt(secret: string, context: string): string;
  /** Throws when the key is not the one the secret was sealed with, or the value was altered. */
  decrypt(sealed: string, context: string): string;
}

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_HEX = /^[0-9a-f]{64}$/i;

export const KEY_FILE = 'webhook-secret.key';

/** A new subscription secret: long, random, URL-safe. */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64url')}`;

const keyFromFile = (dataDir: string): Buffer => {
  const file = path.join(dataDir, KEY_FILE);
  fs.mkdirSync(dataDir, { recursive: true });
  try {
    // 'wx' fails when the file exists, so two starting processes never overwrite each other's key.
    fs.writeFileSync(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const hex = fs.readFileSync(file, 'utf8').trim();
  if (!KEY_HEX.test(hex)) throw new Error(`${file} does not hold a 256-bit key in hex; remove it or set WEBHOOK_SECRET_KEY`);
  return Buffer.from(hex, 'hex');
};

export const loadSecretKey = (options: { secretKey: string | null; dataDir: string }): Buffer =>
  options.secretKey === null ? keyFromFile(options.dataDir) : Buffer.from(options.secretKey, 'hex');

export const createSecretBox = (key: Buffer): SecretBox => {
  if (key.length !== 32) throw new Error('the webhook secret key must be 32 bytes');
  return {
    encrypt(secret, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(context));
      const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return `${VERSION}:${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url')}`;
    },
    decrypt(sealed, context) {
      const [version, payload] = sealed.split(':');
      if (version !== VERSION || payload === undefined) throw new Error('unrecognised sealed secret');
      const bytes = Buffer.from(payload, 'base64url');
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES)).setAAD(Buffer.from(context));
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    },
  };
};
