// Webhook secrets at rest: AES-256-GCM under a server key, so the log never holds them in clear.
// The key is WEBHOOK_SECRET_KEY (64 hex) or, when unset, one generated on first start and kept in
// `<dataDir>/webhook-secret.key` (mode 0600). Each ciphertext is bound to its subscription (as
// additional authenticated data), so a secret copied onto another subscription does not decrypt.
//
// A keyring makes the key rotatable: secrets are sealed with the current key as
// `v2:<key id>:<base64url(iv|tag|ciphertext)>`, and opened with the key of the ring that the id
// names, so a previous key (WEBHOOK_PREVIOUS_SECRET_KEYS) still opens what it sealed until those
// secrets are sealed again with the current one. The id is a fingerprint, not the key: 32 bits of
// SHA-256 over a label and the key. Secrets sealed before ids (`v1:<payload>`) are tried with each key.
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { ConfigError } from '../config/config.js';
import { keyFromFile } from '../shared/key-file.js';

export interface SecretBox {
  /** Seals with the current key. */
  encrypt(secret: string, context: string): string;
  /** Throws when no key of the ring is the one the secret was sealed with, or the value was altered. */
  decrypt(sealed: string, context: string): string;
  /** True unless `sealed` is in the current format under the current key. */
  needsResealing(sealed: string): boolean;
}

const KEY_ID_LABEL = 'support-platform webhook secret key id\n';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export const KEY_FILE = 'webhook-secret.key';

/**
 * A new subscription secret: 32 random bytes in the Standard Webhooks serialization (`whsec_` and
 * standard base64), so the official libraries take it as it is (src/webhooks/signature.ts).
 */
export const newWebhookSecret = (): string => `whsec_${randomBytes(32).toString('base64')}`;

/** Where the current key came from, as loadSecretKey takes it: WEBHOOK_SECRET_KEY, or the key file when that is unset. */
export interface KeySource {
  readonly secretKey: string | null;
  readonly dataDir: string;
}

export const loadSecretKey = (options: KeySource): Buffer =>
  options.secretKey === null ? keyFromFile(options.dataDir, KEY_FILE, 'WEBHOOK_SECRET_KEY') : Buffer.from(options.secretKey, 'hex');

/** The service's box for what the log keeps sealed: the current key and WEBHOOK_PREVIOUS_SECRET_KEYS. */
export const secretBoxOf = (source: KeySource, previousSecretKeys: readonly string[]): SecretBox =>
  createSecretBox(
    loadSecretKey(source),
    previousSecretKeys.map((hex) => Buffer.from(hex, 'hex')),
  );

/** Start-up stops when sealed secrets do not open: it says which variable to set, and the key file when the key came from it. */
export const secretsDoNotOpen = (count: number, source: KeySource): ConfigError => {
  const which = count === 1 ? 'the secret of 1 webhook subscription does' : `the secrets of ${count} webhook subscriptions do`;
  const file =
    source.secretKey === null
      ? ` WEBHOOK_SECRET_KEY is unset, so the current key is the one generated in ${path.join(source.dataDir, KEY_FILE)}: that file was replaced or removed since they were sealed; putting the original back works too.`
      : '';
  return new ConfigError(
    'WEBHOOK_SECRET_KEY',
    `${which} not open with the current key or any of WEBHOOK_PREVIOUS_SECRET_KEYS: set the key that sealed them as WEBHOOK_SECRET_KEY, ` +
      `or list it in WEBHOOK_PREVIOUS_SECRET_KEYS to have them sealed again with the current key.${file}`,
  );
};

interface RingKey {
  readonly id: string;
  readonly key: Buffer;
}

const ringKey = (key: Buffer): RingKey => {
  if (key.length !== 32) throw new Error('a webhook secret key must be 32 bytes');
  return { id: createHash('sha256').update(KEY_ID_LABEL).update(key).digest('hex').slice(0, 8), key };
};

const open = (key: Buffer, payload: string, context: string): string => {
  const bytes = Buffer.from(payload, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, IV_BYTES)).setAAD(Buffer.from(context));
  decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  return Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
};

/** The current key seals; it and the previous ones open. */
export const createSecretBox = (current: Buffer, previous: readonly Buffer[] = []): SecretBox => {
  const ring = [current, ...previous].map(ringKey);
  const { id: currentId, key: currentKey } = ring[0] as RingKey;

  /** The keys that may have sealed it: the one its id names (several only if two ids collide), or any for v1. */
  const candidates = (sealed: string): { keys: readonly RingKey[]; payload: string } => {
    const parts = sealed.split(':');
    if (parts[0] === 'v2' && parts.length === 3) return { keys: ring.filter((k) => k.id === parts[1]), payload: parts[2] as string };
    if (parts[0] === 'v1' && parts.length === 2) return { keys: ring, payload: parts[1] as string };
    throw new Error('unrecognised sealed secret');
  };

  return {
    encrypt(secret, context) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', currentKey, iv).setAAD(Buffer.from(context));
      const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
      return `v2:${currentId}:${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64url')}`;
    },
    decrypt(sealed, context) {
      const { keys, payload } = candidates(sealed);
      for (const { key } of keys) {
        try {
          return open(key, payload, context);
        } catch {
          // Another key of the ring may have sealed it (v1, or colliding ids).
        }
      }
      throw new Error("no key of this server's keyring opens it");
    },
    needsResealing: (sealed) => !sealed.startsWith(`v2:${currentId}:`),
  };
};
