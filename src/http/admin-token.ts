// The admin token of a request: `Authorization: Bearer <ADMIN_TOKEN>`, compared in constant time (of
// digests, so the token's length does not show either).
import { createHash, timingSafeEqual } from 'node:crypto';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Whether the Authorization header carries `token` (never, when the server has none). */
export const carriesAdminToken = (authorization: string, token: string | null): boolean => {
  if (token === null) return false;
  const sent = /^Bearer[ \t]+(\S+)$/i.exec(authorization)?.[1] ?? '';
  return timingSafeEqual(digest(sent), digest(token));
};
