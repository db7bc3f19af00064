// The workspace (project) aggregate: its plan, whether it is blocked, and its API keys. Keys are
// only ever known here by their SHA-256 hash. All its events are internal.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate, Decided } from '../aggregate.js';
import { domainError } from '../errors.js';
import { ownEntry } from '../own-entry.js';

export type KeyStatus = 'active' | 'disabled' | 'deleted';

export interface WorkspaceState {
  readonly exists: boolean;
  readonly name: string;
  readonly plan: string;
  readonly blocked: boolean;
  readonly keys: Readonly<Record<string, KeyStatus>>;
}

export type WorkspaceCommand =
  | { readonly kind: 'create'; readonly name: string; readonly plan: string; readonly keyId: string; readonly keyHash: string; readonly at: string }
  | { readonly kind: 'issue_key'; readonly keyId: string; readonly keyHash: string; readonly at: string }
  | { readonly kind: 'set_key_status'; readonly keyId: string; readonly status: KeyStatus }
  | { readonly kind: 'set_blocked'; readonly blocked: boolean }
  | { readonly kind: 'set_plan'; readonly plan: string };

export const WORKSPACE_EVENT_TYPES = [
  'workspace.created',
  'workspace.blocked',
  'workspace.unblocked',
  'workspace.plan_set',
  'api_key.issued',
  'api_key.disabled',
  'api_key.enabled',
  'api_key.deleted',
] as const;

export const workspaceStream = (workspaceId: string): string => `workspace-${workspaceId}`;

const initial: WorkspaceState = { exists: false, name: '', plan: '', blocked: false, keys: {} };

const KEY_STATUS_EVENT: Record<KeyStatus, string> = { active: 'api_key.enabled', disabled: 'api_key.disabled', deleted: 'api_key.deleted' };

const keyStatusOf = (type: string): KeyStatus | null =>
  type === 'api_key.issued' || type === 'api_key.enabled' ? 'active' : type === 'api_key.disabled' ? 'disabled' : type === 'api_key.deleted' ? 'deleted' : null;

const evolve: Aggregate<WorkspaceState, WorkspaceCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case 'workspace.created':
      return { ...state, exists: true, name: String(data['name']), plan: String(data['plan']) };
    case 'workspace.blocked':
    case 'workspace.unblocked':
      return { ...state, blocked: type === 'workspace.blocked' };
    case 'workspace.plan_set':
      return { ...state, plan: String(data['plan']) };
    default: {
      const status = keyStatusOf(type);
      return status === null ? state : { ...state, keys: { ...state.keys, [String(data['key_id'])]: status } };
    }
  }
};

const notFound = () => left(domainError('WORKSPACE_NOT_FOUND', 'Workspace not found'));

const decide: Aggregate<WorkspaceState, WorkspaceCommand>['decide'] = (command, state) => {
  if (command.kind === 'create') {
    if (state.exists) return right([]);
    return right([
      { type: 'workspace.created', data: { name: command.name, plan: command.plan, created_at: command.at } },
      { type: 'api_key.issued', data: { key_id: command.keyId, key_hash: command.keyHash, created_at: command.at } },
    ]);
  }
  if (!state.exists) return notFound();
  switch (command.kind) {
    case 'issue_key':
      return right([{ type: 'api_key.issued', data: { key_id: command.keyId, key_hash: command.keyHash, created_at: command.at } }]);
    case 'set_key_status': {
      const current = ownEntry(state.keys, command.keyId);
      if (current === undefined || current === 'deleted') return left(domainError('VALIDATION_ERROR', 'Unknown API key', { key_id: command.keyId }));
      const events: Decided[] = current === command.status ? [] : [{ type: KEY_STATUS_EVENT[command.status], data: { key_id: command.keyId } }];
      return right(events);
    }
    case 'set_blocked':
      return right(state.blocked === command.blocked ? [] : [{ type: command.blocked ? 'workspace.blocked' : 'workspace.unblocked', data: {} }]);
    case 'set_plan':
      return right(state.plan === command.plan ? [] : [{ type: 'workspace.plan_set', data: { plan: command.plan } }]);
  }
};

export const workspaceAggregate: Aggregate<WorkspaceState, WorkspaceCommand> = { initial, evolve, decide };
