// What the middleware chain puts on ctx.state for the routes.
import type Koa from 'koa';
import type { WorkspaceRow } from '../../projections/workspace-directory.js';
import type { RequestScope } from '../app/request-scope.js';

export interface ApiState {
  requestId: string;
  /** Set by the errors middleware: what the route's commands carry (app/request-scope.ts). */
  scope: RequestScope;
  /** Set by the auth middleware on /api/v1 routes. */
  workspace: WorkspaceRow;
  keyId: string;
  /** Set by a route whose answer holds a secret (a webhook secret, an API key): an Idempotency-Key records it sealed (middleware/idempotency.ts). */
  secretAnswer?: true;
}

export type ApiContext = Koa.ParameterizedContext<ApiState>;
