// Authentication and rate limiting of /api/v1 (spec "Authentication" and "Limits"). A request with
// a working key counts against that key's bucket; every other request counts against its client IP,
// and so does a key's first request in this process, before the key is verified.
import type Koa from 'koa';
import type { WorkspaceDirectory } from '../../../projections/workspace-directory.js';
import { createBoundedCache } from '../../shared/bounded-cache.js';
import { hashApiKey } from '../../app/workspaces.js';
import { domainError } from '../../domain/errors.js';
import type { RateLimiter } from '../../ratelimit/rate-limiter.js';
import { business, short } from '../api-error.js';
import type { ApiState } from '../context.js';

export interface AuthOptions {
  readonly directory: WorkspaceDirectory;
  readonly rateLimiter: RateLimiter;
  readonly limits: { readonly perKey: number; readonly perIp: number };
  /**
   * Resolves once the directory holds every key change committed before the call. Where other
   * processes change keys (shared log), a disabled or deleted key must stop at once on this server
   * too; where this process alone writes, the directory is current already and this is absent.
   */
  readonly keysCurrent?: () => Promise<void>;
}

const BEARER = /^Bearer[ \t]+(\S+)[ \t]*$/i;
/**
 * Hashes of the keys that named a workspace's key when presented last (a SHA-256 per request was
 * about 1% of a POST's CPU). Only the hash is kept: the key's status is read from the directory at
 * every request, so a disabled or deleted key still stops at once.
 */
const KNOWN_KEYS = 1_000;
const CHALLENGE = { 'WWW-Authenticate': 'Bearer' };

type LimitOptions = Pick<AuthOptions, 'rateLimiter'>;

/** Counts a request against a bucket; throws 429 RATE_LIMIT_EXCEEDED past the limit, passes when the counter store is down. */
const createCounter = (options: LimitOptions) => {
  let limiterDown = false;
  return async (bucket: string, limit: number): Promise<void> => {
    let decision;
    try {
      decision = await options.rateLimiter.hit(bucket, limit);
      limiterDown = false;
    } catch (error) {
      // The spec: when the counter store is unavailable, requests are not limited.
      if (!limiterDown) console.warn('rate limiter unavailable, requests are not limited:', (error as Error).message);
      limiterDown = true;
      return;
    }
    if (!decision.allowed) {
      throw business(domainError('RATE_LIMIT_EXCEEDED', 'Rate limit exceeded; retry after the window opens', { retry_after: decision.retryAfterSeconds }), {
        'Retry-After': String(decision.retryAfterSeconds),
      });
    }
  };
};

/** Requests without an API key (signed media links) count against their client IP, as requests without a working key do. */
export const limitByIp = (options: LimitOptions & { readonly perIp: number }): Koa.Middleware<ApiState> => {
  const count = createCounter(options);
  return async (ctx, next) => {
    await count(`ip:${ctx.ip}`, options.perIp);
    await next();
  };
};

export const authenticate = (options: AuthOptions): Koa.Middleware<ApiState> => {
  const verifiedInThisProcess = new Set<string>();
  const count = createCounter(options);
  const knownHashes = createBoundedCache<string>(KNOWN_KEYS);

  return async (ctx, next) => {
    await options.keysCurrent?.();
    const key = BEARER.exec(ctx.get('Authorization'))?.[1];
    const hash = key === undefined ? undefined : (knownHashes.get(key) ?? hashApiKey(key));
    const owner = hash === undefined ? undefined : options.directory.ownerOfKey(hash);
    // Keys that name nobody are not kept: made-up keys cannot push the real ones out.
    if (owner !== undefined) knownHashes.set(key as string, hash as string);
    const working = owner !== undefined && owner.status === 'active' && !owner.workspace.blocked;

    if (working && hash !== undefined && verifiedInThisProcess.has(hash)) {
      await count(`key:${owner.keyId}`, options.limits.perKey);
    } else {
      await count(`ip:${ctx.ip}`, options.limits.perIp);
    }
    if (!working) {
      const reason = key === undefined ? 'Missing or malformed Authorization header' : 'Invalid API key';
      throw short(401, reason, CHALLENGE);
    }
    verifiedInThisProcess.add(hash as string);
    ctx.state.workspace = owner.workspace;
    ctx.state.keyId = owner.keyId;
    await next();
  };
};
