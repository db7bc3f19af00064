// The workspace directory read model: workspaces with plan and blocked flag, and their API keys by
// hash, for authentication. Pure row evolution plus an in-memory store, rebuilt from the log at start.
import type { RecordedEvent } from '../src/log/event-log.js';
import { WORKSPACE_EVENT_TYPES, type KeyStatus } from '../src/domain/workspace/workspace.js';
import { ownEntry } from '../src/domain/own-entry.js';

export interface WorkspaceRow {
  readonly id: string;
  readonly name: string;
  readonly plan: string;
  readonly blocked: boolean;
  readonly createdAt: string;
  readonly keys: Readonly<Record<string, { readonly hash: string; readonly status: KeyStatus }>>;
}

export const evolveWorkspaceRow = (row: WorkspaceRow | undefined, event: Pick<RecordedEvent, 'type' | 'data' | 'workspaceId'>): WorkspaceRow | undefined => {
  const { type, data } = event;
  if (type === 'workspace.created') {
    return { id: event.workspaceId, name: String(data['name']), plan: String(data['plan']), blocked: false, createdAt: String(data['created_at']), keys: {} };
  }
  if (row === undefined) return undefined;
  const keyId = String(data['key_id']);
  const key = ownEntry(row.keys, keyId);
  switch (type) {
    case 'workspace.blocked':
    case 'workspace.unblocked':
      return { ...row, blocked: type === 'workspace.blocked' };
    case 'workspace.plan_set':
      return { ...row, plan: String(data['plan']) };
    case 'api_key.issued':
      return { ...row, keys: { ...row.keys, [keyId]: { hash: String(data['key_hash']), status: 'active' } } };
    case 'api_key.enabled':
    case 'api_key.disabled':
    case 'api_key.deleted': {
      if (key === undefined) return row;
      const status: KeyStatus = type === 'api_key.enabled' ? 'active' : type === 'api_key.disabled' ? 'disabled' : 'deleted';
      return { ...row, keys: { ...row.keys, [keyId]: { ...key, status } } };
    }
    default:
      return row;
  }
};

export interface KeyOwner {
  readonly workspace: WorkspaceRow;
  readonly keyId: string;
  readonly status: KeyStatus;
}

export interface WorkspaceDirectory {
  readonly types: readonly string[];
  apply(event: RecordedEvent): void;
  workspace(id: string): WorkspaceRow | undefined;
  ownerOfKey(keyHash: string): KeyOwner | undefined;
  count(): number;
}

export const createWorkspaceDirectory = (): WorkspaceDirectory => {
  const workspaces = new Map<string, WorkspaceRow>();
  const keyIndex = new Map<string, { workspaceId: string; keyId: string }>();
  return {
    types: WORKSPACE_EVENT_TYPES,
    apply(event) {
      const row = evolveWorkspaceRow(workspaces.get(event.workspaceId), event);
      if (row === undefined) return;
      workspaces.set(row.id, row);
      for (const [keyId, key] of Object.entries(row.keys)) keyIndex.set(key.hash, { workspaceId: row.id, keyId });
    },
    workspace: (id) => workspaces.get(id),
    ownerOfKey(keyHash) {
      const entry = keyIndex.get(keyHash);
      const workspace = entry === undefined ? undefined : workspaces.get(entry.workspaceId);
      const key = entry === undefined || workspace === undefined ? undefined : ownEntry(workspace.keys, entry.keyId);
      return workspace === undefined || key === undefined || entry === undefined ? undefined : { workspace, keyId: entry.keyId, status: key.status };
    },
    count: () => workspaces.size,
  };
};
