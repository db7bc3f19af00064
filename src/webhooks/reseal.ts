// After a key rotation, every secret still sealed with a previous key (or in the format before key
// ids) is sealed again with the current one, so the previous key can then leave
// WEBHOOK_PREVIOUS_SECRET_KEYS. Each goes through the command handler with the sealed value it read:
// of several processes resealing at once, one writes and the others find nothing left to do.
import type { Core } from '../app/core.js';
import type { SecretBox } from './secrets.js';
import { runSubscriptionCommand, secretContext, type SubscriptionReadModel } from './subscriptions.js';

export interface Resealed {
  /** Sealed again by this call. */
  readonly resealed: number;
  /** Left for the next start (the log refused the append, or stayed contended). */
  readonly failed: number;
}

/** Reseals what needs it until done or `stopping()`; never rejects. */
export const resealSecrets = async (
  core: Core,
  directory: Pick<SubscriptionReadModel, 'secrets'>,
  secrets: SecretBox,
  stopping: () => boolean,
): Promise<Resealed> => {
  let resealed = 0;
  let failed = 0;
  for (const { workspaceId, id, secret, sealed } of directory.secrets().filter((s) => secrets.needsResealing(s.sealed))) {
    if (stopping()) break;
    try {
      const result = await runSubscriptionCommand(core, workspaceId, id, { kind: 'reseal', from: sealed, to: secrets.encrypt(secret, secretContext(workspaceId, id)) });
      // A refusal (deleted meanwhile) or no event (resealed by another process) is not ours to count.
      if (result._tag === 'Right' && result.right.records.length > 0) resealed += 1;
    } catch (error) {
      failed += 1;
      console.error(`webhook ${id}: sealing its secret with the current key failed (${(error as Error).message}); the next start tries again`);
    }
  }
  return { resealed, failed };
};
