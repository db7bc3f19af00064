// The Notifier port: wakes long polls when a workspace's feed grows. In-process in the embedded
// mode, Redis pub/sub across API servers in the distributed mode.
export interface Notifier {
  /** Announces that `workspaceId`'s feed has events up to `offset`. */
  publish(workspaceId: string, offset: number): Promise<void>;
  /** Calls `listener` for each announcement for `workspaceId`; returns the unsubscribe function. */
  subscribe(workspaceId: string, listener: (offset: number) => void): () => void;
  close(): Promise<void>;
}
