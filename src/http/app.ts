// The koa application: request ids, the error renderer, maintenance, body parsing (after the guards,
// writes held while webhook delivery asks for it: middleware/write-hold.ts), then four
// surfaces — the public /api/v1 (API key), /admin/v1 and /internal/v1 (admin token), and /api/media
// (signed media links: the link is the credential; rate-limited by client IP). Paths match exactly
// and case-sensitively everywhere, and each guard decides with its own surface's router.
import Koa from 'koa';
import { Router } from '@koa/router';
import getRawBody from 'raw-body';
import type { WorkspaceDirectory } from '../../projections/workspace-directory.js';
import type { RateLimiter } from '../ratelimit/rate-limiter.js';
import { carriesAdminToken } from './admin-token.js';
import { short, invalid } from './api-error.js';
import type { ApiState } from './context.js';
import { authenticate, limitByIp, type AuthOptions } from './middleware/auth.js';
import { errors } from './middleware/errors.js';
import { idempotency, type IdempotencyOptions } from './middleware/idempotency.js';
import { maintenance } from './middleware/maintenance.js';
import { requestId } from './middleware/request-id.js';
import type { Operation } from './operations.js';

export type ApiRouter = Router<ApiState>;

/** Route modules: each registers its routes on the surface it belongs to. */
export interface RouteModule {
  readonly api?: (router: ApiRouter) => void;
  readonly admin?: (router: ApiRouter) => void;
  readonly internal?: (router: ApiRouter) => void;
  /** Routes under /api/media that a signed link authorises instead of an API key (counted by client IP). */
  readonly signed?: (router: ApiRouter) => void;
  /** Routes outside the versioned surfaces, without auth (health). */
  readonly open?: (router: ApiRouter) => void;
  /** Full paths of routes whose body is multipart, which read it themselves (no JSON parsing). */
  readonly multipart?: readonly string[];
  /** Its public routes (`api`, and open ones under /api/v1) as the API document describes them. */
  readonly operations?: readonly Operation[];
}

export interface HttpAppOptions extends Pick<AuthOptions, 'keysCurrent'> {
  readonly directory: WorkspaceDirectory;
  readonly rateLimiter: RateLimiter;
  readonly limits: { readonly perKey: number; readonly perIp: number };
  readonly adminToken: string | null;
  readonly maintenanceMode: () => boolean;
  readonly trustProxy: boolean;
  readonly bodyLimitBytes: number;
  readonly modules: readonly RouteModule[];
  /** Where Idempotency-Key claims and answers are kept (see middleware/idempotency.ts). */
  readonly idempotency: Omit<IdempotencyOptions, 'routed' | 'multipart' | 'resumable'>;
  /** Writes that wait for webhook delivery first (middleware/write-hold.ts), where the service has such a hold. */
  readonly heldWrites?: Koa.Middleware<ApiState>;
}

const JSON_TYPES = ['application/json', 'application/*+json'];
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

const BODY_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
const notJson = () => invalid([{ type: 'content_type', loc: ['header', 'content-type'], msg: 'Expected a JSON body with Content-Type application/json' }]);

/**
 * JSON bodies of the routes that exist, except the multipart ones, which read and check their bodies
 * themselves (an unknown route answers 404 without reading a byte). The bytes are decoded strictly,
 * so invalid UTF-8 is a 422 instead of silently becoming U+FFFD; a body of another type is a 422.
 */
const jsonBody = (limit: number, multipart: ReadonlySet<string>, routed: (ctx: Koa.Context) => boolean): Koa.Middleware => async (ctx, next) => {
  if (!BODY_METHODS.includes(ctx.method) || multipart.has(ctx.path) || !routed(ctx)) return next();
  const chunked = ctx.get('Transfer-Encoding') !== '';
  if (!chunked && !(ctx.request.length > 0)) return next();
  // The usual header is matched as is; anything else goes through the full media-type parse.
  const isJson = ctx.get('Content-Type') === 'application/json' || typeof ctx.request.is(JSON_TYPES) === 'string';
  // A declared body of another type is refused unread; a chunked one may turn out empty (Node's own
  // client sends an empty chunked body for a POST without one), which is no body at all.
  if (!isJson && !chunked) throw notJson();
  const bytes = await getRawBody(ctx.req, { limit, length: ctx.request.length });
  if (bytes.length === 0) return next();
  if (!isJson) throw notJson();
  let text: string;
  try {
    text = strictUtf8.decode(bytes);
  } catch {
    throw invalid([{ type: 'utf8_invalid', loc: ['body'], msg: 'Body is not valid UTF-8' }]);
  }
  try {
    ctx.request.body = text.trim() === '' ? undefined : JSON.parse(text);
  } catch {
    throw invalid([{ type: 'json_invalid', loc: ['body'], msg: 'Body is not valid JSON' }]);
  }
  return next();
};

/**
 * A request refused before its body was read to the end leaves the rest of it in the connection:
 * the connection closes after the answer instead of reading an unbounded remainder (a chunked body
 * over the limit stalled the next request on a kept-alive connection until the request deadline).
 */
const closeAfterUnreadBody = (): Koa.Middleware => async (ctx, next) => {
  await next();
  if (ctx.status >= 400 && !ctx.req.complete) ctx.set('Connection', 'close');
};

/** HTTP/1.1 requires Host (Node's own check answers without a request id, so the server leaves it here). */
const requireHost = (): Koa.Middleware => async (ctx, next) => {
  if (ctx.req.httpVersion === '1.1' && ctx.get('Host') === '') throw short(400, 'Bad Request: HTTP/1.1 requires a Host header');
  await next();
};

const adminOnly = (token: string | null): Koa.Middleware => async (ctx, next) => {
  if (token === null) throw short(404, 'Not Found');
  if (!carriesAdminToken(ctx.get('Authorization'), token)) throw short(401, 'Invalid admin token', { 'WWW-Authenticate': 'Bearer' });
  await next();
};

/**
 * The one rule for matching paths on the whole server: exact and case-sensitive, as written. Another
 * letter case, a trailing or doubled slash, a percent-encoded letter or a `;` parameter is another
 * path, and so an unknown route.
 */
const MATCHING = { sensitive: true, strict: true } as const;

/** A versioned surface: its routes and the guard that every request reaching them passes. */
interface Surface {
  readonly prefix: string;
  readonly router: ApiRouter;
  readonly guard: Koa.Middleware;
}

const surface = (prefix: string, guard: Koa.Middleware, modules: readonly RouteModule[], pick: (m: RouteModule) => ((r: ApiRouter) => void) | undefined): Surface => {
  const router = new Router<ApiState>({ prefix, ...MATCHING });
  modules.forEach((m) => pick(m)?.(router));
  return { prefix, router, guard };
};

/**
 * The guard runs wherever the surface's router would dispatch: its own matcher decides, so no
 * spelling of a path reaches a handler around the guard. Unknown paths under the prefix pass the
 * guard too, so they are authenticated and counted like the rest. (The prefix test comes first only
 * because it is cheaper: the router's match alone is what makes the guard complete.)
 */
const guarded = ({ prefix, router, guard }: Surface): Koa.Middleware => async (ctx, next) =>
  ctx.path === prefix || ctx.path.startsWith(`${prefix}/`) || router.match(ctx.path, ctx.method).path.length > 0 ? guard(ctx, next) : next();

/** A path these routers know under other methods only: 405, with the methods it has in Allow. */
const methodNotAllowed = (routers: readonly ApiRouter[]): Koa.Middleware => async (ctx, next) => {
  const allowed = routers.flatMap((r) => r.match(ctx.path, ctx.method).path.flatMap((l) => l.methods));
  if (allowed.length > 0) throw short(405, 'Method Not Allowed', { Allow: [...new Set(allowed)].join(', ') });
  await next();
};

/** A route as registered: its methods and its path pattern (e.g. `/api/v1/tickets/:ticket_id`). */
export interface RegisteredRoute {
  readonly methods: readonly string[];
  readonly path: string;
}

const registered = (router: ApiRouter): RegisteredRoute[] =>
  router.stack.filter((layer) => layer.methods.length > 0).map((layer) => ({ methods: [...layer.methods], path: String(layer.path) }));

export interface HttpApp {
  readonly app: Koa<ApiState>;
  /** Every route of every surface, open ones included. */
  readonly routes: readonly RegisteredRoute[];
}

export const createHttpApp = (options: HttpAppOptions): HttpApp => {
  const app = new Koa<ApiState>({ proxy: options.trustProxy });
  app.silent = true;
  app.use(closeAfterUnreadBody());
  app.use(requestId());
  app.use(errors());
  app.use(requireHost());
  const open = new Router<ApiState>(MATCHING);
  options.modules.forEach((m) => m.open?.(open));
  app.use(open.routes());
  // Another method on an open path: answered here, as the guards below would ask for a key it never needs.
  app.use(methodNotAllowed([open]));
  app.use(maintenance(options.maintenanceMode));
  const admin = adminOnly(options.adminToken);
  const adminSurface = surface('/admin/v1', admin, options.modules, (m) => m.admin);
  const surfaces = [
    surface('/api/v1', authenticate(options) as Koa.Middleware, options.modules, (m) => m.api),
    adminSurface,
    surface('/internal/v1', admin, options.modules, (m) => m.internal),
    surface('/api/media', limitByIp({ rateLimiter: options.rateLimiter, perIp: options.limits.perIp }) as Koa.Middleware, options.modules, (m) => m.signed),
  ];
  for (const s of surfaces) app.use(guarded(s));
  // After the guards (a workspace is known), before the body is read: a held request holds no body.
  if (options.heldWrites !== undefined) app.use(options.heldWrites);
  const multipart = new Set(options.modules.flatMap((m) => m.multipart ?? []));
  const routers = surfaces.map((s) => s.router);
  const routed = (ctx: Koa.Context) => routers.some((r) => r.match(ctx.path, ctx.method).route);
  app.use(jsonBody(options.bodyLimitBytes, multipart, routed));
  // The admin routes answer API keys that exist only in their answer (the log keeps a hash).
  const resumable = (ctx: Koa.Context) => !adminSurface.router.match(ctx.path, ctx.method).route;
  app.use(idempotency({ ...options.idempotency, routed, multipart, resumable }));
  for (const router of routers) app.use(router.routes());
  app.use(methodNotAllowed(routers));
  app.use(() => {
    throw short(404, 'Not Found');
  });
  return { app, routes: [open, ...routers].flatMap(registered) };
};
