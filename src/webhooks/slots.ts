// WEBHOOK_MAX_SUBSCRIPTIONS, exact under concurrency across processes: a create claims a slot in the
// workspace's slot stream (domain/subscription/slots.ts) through the command handler, which appends
// with the stream's expected revision, so every claim is decided on all the claims before it (in this
// process claims queue per stream; a race lost to another process is decided again).
//
// Crash safety without a multi-stream append (the log appends to one stream at a time): a create that
// dies between its claim and its subscription leaves a claim with no subscription, and a delete that
// dies between its marker and its release leaves a claim for a deleted one. When a claim meets the
// limit, the claims older than any create takes whose subscription the read model does not list are
// checked on their own streams: `abandon` appends a marker only to a stream that does not exist (its
// expected revision), so a create still under way can no longer land, and a stream that is abandoned
// or deleted gives its slot back.
import type { Core } from '../app/core.js';
import type { RequestScope } from '../app/request-scope.js';
import { createCommandHandler, createStateCache, loadState } from '../app/command-handler.js';
import { claimedBefore, slotsAggregate, slotsStream, type SlotsCommand } from '../domain/subscription/slots.js';
import { business } from '../http/api-error.js';
import { runSubscriptionCommand, type SubscriptionDirectory } from './subscriptions.js';

export interface SubscriptionSlots {
  /** Holds a slot for a subscription about to be created; 422 WEBHOOK_LIMIT_REACHED when the workspace has none left. */
  claim(workspaceId: string, subscriptionId: string, scope: RequestScope | undefined): Promise<void>;
  /** Gives the subscription's slot back (nothing to do when it holds none). */
  release(workspaceId: string, subscriptionId: string, scope: RequestScope | undefined): Promise<void>;
}

/** A claim this old without its subscription was left by a create that died: no create takes this long. */
const ABANDONED_AFTER_US = 5 * 60 * 1_000_000;
const CACHED_WORKSPACES = 1024;

export const createSubscriptionSlots = (core: Core, directory: SubscriptionDirectory): SubscriptionSlots => {
  // Slot streams are never deleted: the cached fold stays exact, and a claim reads only what is new.
  const handle = createCommandHandler(core.log, core.newId, createStateCache(CACHED_WORKSPACES));
  const run = (workspaceId: string, command: SlotsCommand, scope: RequestScope | undefined) => handle(slotsAggregate, slotsStream(workspaceId), workspaceId, command, scope);

  const claimOnce = (workspaceId: string, subscriptionId: string, scope: RequestScope | undefined) =>
    run(workspaceId, {
      kind: 'claim',
      subscriptionId,
      max: core.config.webhooks.maxSubscriptions,
      at: core.clock(),
      existing: directory.list(workspaceId).map((row) => row.id),
    }, scope);

  const release = async (workspaceId: string, subscriptionId: string, scope: RequestScope | undefined): Promise<void> => {
    await run(workspaceId, { kind: 'release', subscriptionId }, scope);
  };

  /** Gives back the slots of old claims whose subscription never came to be or is deleted; true when any was. */
  const releaseAbandoned = async (workspaceId: string, scope: RequestScope | undefined): Promise<boolean> => {
    const { state } = await loadState(core.log, slotsStream(workspaceId), slotsAggregate.evolve, slotsAggregate.initial);
    const suspects = claimedBefore(state, core.clock() - ABANDONED_AFTER_US).filter((id) => directory.get(workspaceId, id) === undefined);
    let released = false;
    for (const id of suspects) {
      const checked = await runSubscriptionCommand(core, workspaceId, id, { kind: 'abandon' }, scope);
      if (checked._tag === 'Left' || !checked.right.state.deleted) continue;
      await release(workspaceId, id, scope);
      released = true;
    }
    return released;
  };

  return {
    async claim(workspaceId, subscriptionId, scope) {
      let claimed = await claimOnce(workspaceId, subscriptionId, scope);
      if (claimed._tag === 'Left' && (await releaseAbandoned(workspaceId, scope))) claimed = await claimOnce(workspaceId, subscriptionId, scope);
      if (claimed._tag === 'Left') throw business(claimed.left);
    },
    release,
  };
};
