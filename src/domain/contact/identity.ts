// Contacts are upserted by telegram_id or email. Each identifier of a workspace owns one small
// stream whose first (and only) event names its contact; claiming it with expected revision
// no_stream makes concurrent upserts agree on one contact. The stream name hashes the identifier,
// so no email appears in stream names.
import { createHash } from 'node:crypto';

export const CONTACT_IDENTITY_CLAIMED = 'contact.identity_claimed';

export type IdentityKind = 'telegram_id' | 'email';

export interface IdentityKey {
  readonly kind: IdentityKind;
  readonly value: string;
}

export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

/** The identifiers of a contact, telegram_id first: when they point at different contacts, it wins. */
export const identityKeys = (fields: { readonly telegram_id?: string | null; readonly email?: string | null }): IdentityKey[] => [
  ...(fields.telegram_id ? [{ kind: 'telegram_id' as const, value: fields.telegram_id.trim() }] : []),
  ...(fields.email ? [{ kind: 'email' as const, value: normalizeEmail(fields.email) }] : []),
];

export const identityStream = (workspaceId: string, key: IdentityKey): string =>
  `contact-identity-${workspaceId}-${createHash('sha256').update(`${key.kind}:${key.value}`).digest('hex')}`;
