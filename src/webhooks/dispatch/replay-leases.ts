// The ReplayLeases port: which dispatcher drives a replay. One dispatcher at a time holds a replay's
// lease and renews it while it drives; a dispatcher that dies stops renewing, the lease runs out and
// another one takes the replay over from the cursor recorded in the log. Alone (the embedded worker,
// or a dispatcher without Redis), a dispatcher leases to itself (replay-leases/memory.ts); several
// share Redis (replay-leases/redis.ts).

export interface ReplayLeases {
  /** How long a lease lasts without renewal. */
  readonly ttlMs: number;
  /** Takes the replay's lease unless another holder has it; true when this one holds it now. */
  acquire(replayId: string): Promise<boolean>;
  /** Extends this holder's lease; false when it is no longer this holder's. */
  renew(replayId: string): Promise<boolean>;
  release(replayId: string): Promise<void>;
  close(): Promise<void>;
}
