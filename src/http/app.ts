// The koa application: request ids, the error renderer, maintenance, body parsing, then three
// surfaces — the public /api/v1 (API key), /admin/v1 and /internal/v1 (admin token).
import { timingSafeEqual, createHash } from 'node:crypto';
import Koa from 'koa';
import { Router } from '@koa/router';
import { koaBody } from 'koa-body';
import type { WorkspaceDirectory } from '../../projections/workspace-directory.js';
import type { RateLimiter } from '../ratelimit/rate-limiter.js';
import { short, invalid } from './api-error.js';
import type { ApiState } from './context.js';
import { authenticate } from './middleware/auth.js';
import { errors } from './middleware/errors.js';
import { maintenance } from './middleware/maintenance.js';
import { requestId } from './middleware/request-id.js';

export type ApiRouter = Router<ApiState>;

/** Route modules: each registers its routes on the surface it belongs to. */
export interface RouteModule {
  readonly api?: (router: ApiRouter) => void;
  readonly admin?: (router: ApiRouter) => void;
  readonly internal?: (router: ApiRouter) => void;
  /** Routes outside the versioned surfaces, without auth (health). */
  readonly open?: (router: ApiRouter) => void;
}

export interface HttpAppOptions {
  readonly directory: WorkspaceDirectory;
  readonly rateLimiter: RateLimiter;
  readonly limits: { readonly perKey: number; readonly perIp: number };
  readonly adminToken: string | null;
  readonly maintenanceMode: () => boolean;
  readonly trustProxy: boolean;
  readonly bodyLimitBytes: number;
  readonly modules: readonly RouteModule[];
}

const JSON_TYPES = ['application/json', 'application/*+json'];

/** JSON bodies only (multipart is parsed by the media route itself); a body of another type is a 422. */
const jsonBody = (limit: number): Koa.Middleware => {
  const parse = koaBody({ json: true, multipart: false, urlencoded: false, text: false, jsonStrict: true, jsonLimit: limit, encoding: 'utf-8' });
  return async (ctx, next) => {
    if (ctx.request.is('multipart/*')) return next();
    const hasBody = ctx.request.length > 0 || ctx.get('Transfer-Encoding') !== '';
    if (hasBody && ctx.request.is(JSON_TYPES) === false) {
      throw invalid([{ type: 'content_type', loc: ['header', 'content-type'], msg: 'Expected a JSON body with Content-Type application/json' }]);
    }
    return parse(ctx, next);
  };
};

const digest = (s: string) => createHash('sha256').update(s).digest();

const adminOnly = (token: string | null): Koa.Middleware => async (ctx, next) => {
  if (token === null) throw short(404, 'Not Found');
  const sent = /^Bearer[ \t]+(\S+)$/i.exec(ctx.get('Authorization'))?.[1] ?? '';
  if (!timingSafeEqual(digest(sent), digest(token))) throw short(401, 'Invalid admin token', { 'WWW-Authenticate': 'Bearer' });
  await next();
};

const surface = (prefix: string, guard: Koa.Middleware, modules: readonly RouteModule[], pick: (m: RouteModule) => ((r: ApiRouter) => void) | undefined) => {
  const router = new Router<ApiState>({ prefix });
  router.use(guard as never);
  modules.forEach((m) => pick(m)?.(router));
  return router;
};

export const createHttpApp = (options: HttpAppOptions): Koa<ApiState> => {
  const app = new Koa<ApiState>({ proxy: options.trustProxy });
  app.silent = true;
  app.use(requestId());
  app.use(errors());
  const open = new Router<ApiState>();
  options.modules.forEach((m) => m.open?.(open));
  app.use(open.routes());
  app.use(maintenance(options.maintenanceMode));
  app.use(jsonBody(options.bodyLimitBytes));
  const routers = [
    surface('/api/v1', authenticate(options) as Koa.Middleware, options.modules, (m) => m.api),
    surface('/admin/v1', adminOnly(options.adminToken), options.modules, (m) => m.admin),
    surface('/internal/v1', adminOnly(options.adminToken), options.modules, (m) => m.internal),
  ];
  for (const router of routers) app.use(router.routes());
  app.use(async (ctx) => {
    const allowed = routers.flatMap((r) => r.match(ctx.path, ctx.method).path.flatMap((l) => l.methods));
    if (allowed.length > 0) throw short(405, 'Method Not Allowed', { Allow: [...new Set(allowed)].join(', ') });
    throw short(404, 'Not Found');
  });
  return app;
};
