// Replay leases of a dispatcher alone (the embedded worker, or a dispatcher without Redis): it holds
// each replay's lease itself, so a replay is driven once in the process; nothing expires.
import type { ReplayLeases } from '../replay-leases.js';

export const createMemoryReplayLeases = (): ReplayLeases => {
  const held = new Set<string>();
  return {
    ttlMs: Number.POSITIVE_INFINITY,
    async acquire(replayId) {
      if (held.has(replayId)) return false;
      held.add(replayId);
      return true;
    },
    renew: async (replayId) => held.has(replayId),
    release: async (replayId) => void held.delete(replayId),
    close: async () => held.clear(),
  };
};
