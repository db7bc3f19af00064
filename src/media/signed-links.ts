// Signed media links (spec "Events" notes and "Limits"): a file of an internal note is carried in
// `media[].url` as `/api/media/<id>?expires=<unix seconds>&signature=<hex>`, which GET /api/media/{id}
// serves without an API key until `expires`, 12 hours after the note was recorded. The signature is
// HMAC-SHA256, under the server's MEDIA_SIGNING_KEY, over a label, the media id and the expiry, so
// neither can be changed and a link names one file only. Links are made when the note's event is
// decided and stored in it: webhooks, every retry of them and /updates carry the same bytes.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config/config.js';
import { keyFromFile } from '../shared/key-file.js';

/** How long a link is valid (spec "Limits": signed media link for internal-note files, 12 hours). */
export const SIGNED_LINK_TTL_SECONDS = 12 * 60 * 60;

/** Where MEDIA_SIGNING_KEY is generated and kept when it is unset. */
export const SIGNING_KEY_FILE = 'media-signing.key';

const LABEL = 'support-platform media link v1';
const EXPIRES = /^\d{1,12}$/;
const SIGNATURE = /^[0-9a-f]{64}$/;

export type LinkCheck = 'valid' | 'expired' | 'invalid';

export interface MediaLinks {
  /** The signed address of the file, valid until `expires` (unix seconds). */
  url(mediaId: string, expires: number): string;
  /** The expiry of a link made at `nowMicros`. */
  expiryFrom(nowMicros: number): number;
  /** Whether the link's query (`expires`, `signature`) is this server's signature of the file, and not expired at `nowMicros`. */
  check(mediaId: string, expires: unknown, signature: unknown, nowMicros: number): LinkCheck;
}

export const createMediaLinks = (key: Buffer): MediaLinks => {
  if (key.length !== 32) throw new Error('a media signing key must be 32 bytes');
  const sign = (mediaId: string, expires: string): Buffer => createHmac('sha256', key).update(`${LABEL}\n${mediaId}\n${expires}`).digest();
  return {
    url: (mediaId, expires) => `/api/media/${mediaId}?expires=${expires}&signature=${sign(mediaId, String(expires)).toString('hex')}`,
    expiryFrom: (nowMicros) => Math.floor(nowMicros / 1_000_000) + SIGNED_LINK_TTL_SECONDS,
    check(mediaId, expires, signature, nowMicros) {
      // A repeated parameter arrives as an array: not a link this server made.
      if (typeof expires !== 'string' || typeof signature !== 'string' || !EXPIRES.test(expires) || !SIGNATURE.test(signature)) return 'invalid';
      // Compared in constant time, before the expiry is believed.
      if (!timingSafeEqual(sign(mediaId, expires), Buffer.from(signature, 'hex'))) return 'invalid';
      return Number(expires) * 1_000_000 > nowMicros ? 'valid' : 'expired';
    },
  };
};

/** The links of this server: MEDIA_SIGNING_KEY, or the key generated into the data folder (shared by the processes using it). */
export const mediaLinksOf = (config: Pick<Config, 'mediaSigningKey' | 'dataDir'>): MediaLinks =>
  createMediaLinks(config.mediaSigningKey === null ? keyFromFile(config.dataDir, SIGNING_KEY_FILE, 'MEDIA_SIGNING_KEY') : Buffer.from(config.mediaSigningKey, 'hex'));
