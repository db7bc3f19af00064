// Workspace and API key commands used by the admin surface and first start. A key is shown once,
// at issue; the log keeps only its SHA-256 hash.
import { createHash, randomBytes } from 'node:crypto';
import type { Either } from 'fp-ts/lib/Either.js';
import type { DomainError } from '../domain/errors.js';
import { workspaceAggregate, workspaceStream, type WorkspaceCommand } from '../domain/workspace/workspace.js';
import type { IdSource } from '../shared/ids.js';
import type { CommandHandler, CommandResult } from './command-handler.js';
import type { RequestScope } from './request-scope.js';
import type { WorkspaceState } from '../domain/workspace/workspace.js';

export const hashApiKey = (key: string): string => createHash('sha256').update(key).digest('hex');

const newApiKey = () => `sk_${randomBytes(32).toString('base64url')}`;

export interface WorkspaceCommands {
  create(name: string, plan: string, scope: RequestScope | undefined): Promise<{ workspaceId: string; apiKey: string; position: number }>;
  issueKey(workspaceId: string, scope: RequestScope | undefined): Promise<Either<DomainError, { keyId: string; apiKey: string; position: number }>>;
  run(workspaceId: string, command: WorkspaceCommand, scope: RequestScope | undefined): Promise<Either<DomainError, CommandResult<WorkspaceState>>>;
}

const lastPosition = (result: CommandResult<unknown>): number => result.records.at(-1)?.position ?? 0;

export const createWorkspaceCommands = (handle: CommandHandler, newId: IdSource, nowIso: () => string): WorkspaceCommands => {
  const run = (workspaceId: string, command: WorkspaceCommand, scope: RequestScope | undefined) =>
    handle(workspaceAggregate, workspaceStream(workspaceId), workspaceId, command, scope);
  return {
    run,
    async create(name, plan, scope) {
      const workspaceId = newId();
      const apiKey = newApiKey();
      const result = await run(workspaceId, { kind: 'create', name, plan, keyId: newId(), keyHash: hashApiKey(apiKey), at: nowIso() }, scope);
      if (result._tag === 'Left') throw new Error(`workspace creation failed: ${result.left.message}`);
      return { workspaceId, apiKey, position: lastPosition(result.right) };
    },
    async issueKey(workspaceId, scope) {
      const apiKey = newApiKey();
      const keyId = newId();
      const result = await run(workspaceId, { kind: 'issue_key', keyId, keyHash: hashApiKey(apiKey), at: nowIso() }, scope);
      return result._tag === 'Left' ? result : { _tag: 'Right', right: { keyId, apiKey, position: lastPosition(result.right) } };
    },
  };
};
