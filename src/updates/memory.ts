// In-process Notifier for the embedded mode: a listener set per workspace, no polling.
import type { Notifier } from './notifier.js';

export interface MemoryNotifier extends Notifier {
  /** Listeners currently subscribed, over all workspaces (long polls waiting; tests check for leaks). */
  listenerCount(): number;
}

export const createMemoryNotifier = (): MemoryNotifier => {
  const listeners = new Map<string, Set<(offset: number) => void>>();
  let count = 0;
  return {
    async publish(workspaceId, offset) {
      listeners.get(workspaceId)?.forEach((listener) => listener(offset));
    },
    subscribe(workspaceId, listener) {
      let set = listeners.get(workspaceId);
      if (set === undefined) listeners.set(workspaceId, (set = new Set()));
      // A wrapper per call, so the same function subscribed twice is two subscriptions.
      const entry = (offset: number) => listener(offset);
      set.add(entry);
      count += 1;
      let subscribed = true;
      return () => {
        if (!subscribed) return;
        subscribed = false;
        count -= 1;
        set.delete(entry);
        if (set.size === 0 && listeners.get(workspaceId) === set) listeners.delete(workspaceId);
      };
    },
    listenerCount: () => count,
    async close() {
      listeners.clear();
      count = 0;
    },
  };
};
