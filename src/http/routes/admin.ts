// Admin surface (not part of the public API): workspaces and their API keys.
import * as t from 'io-ts';
import type { WorkspaceCommands } from '../../app/workspaces.js';
import type { ApiContext } from '../context.js';
import type { RouteModule } from '../app.js';
import { business, invalid, notFound } from '../api-error.js';
import { decode, text } from '../validation.js';
import type { WorkspaceCommand } from '../../domain/workspace/workspace.js';

export interface AdminDeps {
  readonly workspaces: WorkspaceCommands;
  readonly planNames: readonly string[];
  readonly defaultPlan: string;
  /** Read-your-writes: resolves once the workspace directory has seen `position`. */
  readonly settled: (position: number) => Promise<void>;
}

const Id = t.type({ workspace_id: t.string });

export const adminRoutes = (deps: AdminDeps): RouteModule => {
  const Plan = t.keyof(Object.fromEntries(deps.planNames.map((p) => [p, null])) as Record<string, null>);
  const CreateWorkspace = t.intersection([t.type({ name: text(200) }), t.partial({ plan: Plan })]);
  const KeyStatus = t.type({ status: t.keyof({ active: null, disabled: null, deleted: null }) });
  const WorkspacePatch = t.partial({ blocked: t.boolean, plan: Plan });

  const run = async (ctx: ApiContext, command: WorkspaceCommand) => {
    const { workspace_id } = decode(Id, { workspace_id: ctx.params['workspace_id'] }, 'path');
    const result = await deps.workspaces.run(workspace_id, command, ctx.state.scope);
    if (result._tag === 'Left') throw business(result.left);
    await deps.settled(result.right.records.at(-1)?.position ?? 0);
    return result.right.state;
  };

  return {
    admin(router) {
      router.post('/workspaces', async (ctx) => {
        const body = decode(CreateWorkspace, ctx.request.body, 'body');
        const created = await deps.workspaces.create(body.name, body.plan ?? deps.defaultPlan, ctx.state.scope);
        await deps.settled(created.position);
        ctx.status = 201;
        // An API key in the answer: an Idempotency-Key's record of it is sealed.
        ctx.state.secretAnswer = true;
        ctx.body = { workspace_id: created.workspaceId, api_key: created.apiKey };
      });
      router.patch('/workspaces/:workspace_id', async (ctx) => {
        const body = decode(WorkspacePatch, ctx.request.body, 'body');
        const commands: WorkspaceCommand[] = [
          ...(body.plan === undefined ? [] : [{ kind: 'set_plan', plan: body.plan } as const]),
          ...(body.blocked === undefined ? [] : [{ kind: 'set_blocked', blocked: body.blocked } as const]),
        ];
        const [first, ...rest] = commands;
        if (first === undefined) throw invalid([{ type: 'missing', loc: ['body'], msg: 'Give at least one of plan, blocked' }]);
        let state = await run(ctx, first);
        for (const command of rest) state = await run(ctx, command);
        ctx.body = { workspace_id: ctx.params['workspace_id'], name: state.name, plan: state.plan, blocked: state.blocked };
      });
      router.post('/workspaces/:workspace_id/keys', async (ctx) => {
        const { workspace_id } = decode(Id, ctx.params, 'path');
        const issued = await deps.workspaces.issueKey(workspace_id, ctx.state.scope);
        if (issued._tag === 'Left') throw issued.left.code === 'WORKSPACE_NOT_FOUND' ? notFound('Workspace') : business(issued.left);
        await deps.settled(issued.right.position);
        ctx.status = 201;
        ctx.state.secretAnswer = true;
        ctx.body = { key_id: issued.right.keyId, api_key: issued.right.apiKey };
      });
      router.patch('/workspaces/:workspace_id/keys/:key_id', async (ctx) => {
        const body = decode(KeyStatus, ctx.request.body, 'body');
        const keyId = String(ctx.params['key_id']);
        await run(ctx, { kind: 'set_key_status', keyId, status: body.status });
        ctx.body = { key_id: keyId, status: body.status };
      });
    },
  };
};
