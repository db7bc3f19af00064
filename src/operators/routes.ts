// Internal operator presence command: POST /internal/v1/workspaces/{id}/operators/{user_id}/status
// emits operator.status.changed (the dashboard's status switch, which the public API cannot cause).
import * as t from 'io-ts';
import type { Core } from '../app/core.js';
import { OperatorStatus } from '../domain/catalogue.js';
import { currentStatus, operatorAggregate, operatorStream } from '../domain/operator/operator.js';
import { business, notFound } from '../http/api-error.js';
import type { RouteModule } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { decode, text } from '../http/validation.js';

const Path = t.type({ workspace_id: t.string, user_id: t.refinement(t.string, (s) => /^[A-Za-z0-9_.-]{1,64}$/.test(s), 'user id') });
const StatusBody = t.intersection([t.type({ status: OperatorStatus }), t.partial({ status_text: t.union([text(200), t.null]), status_emoji: t.union([text(32), t.null]) })]);

export const operatorRoutes = (core: Core): RouteModule => ({
  internal(router) {
    router.post('/workspaces/:workspace_id/operators/:user_id/status', async (ctx: ApiContext) => {
      const { workspace_id: workspaceId, user_id: userId } = decode(Path, ctx.params, 'path');
      if (core.directory.workspace(workspaceId) === undefined) throw notFound('Workspace');
      const body = decode(StatusBody, ctx.request.body, 'body');
      const command = { user_id: userId, status: body.status, status_text: body.status_text ?? null, status_emoji: body.status_emoji ?? null };
      const result = await core.handle(operatorAggregate, operatorStream(workspaceId, userId), workspaceId, command, ctx.state.scope);
      if (result._tag === 'Left') throw business(result.left);
      ctx.body = currentStatus(result.right.state, userId);
    });
  },
});
