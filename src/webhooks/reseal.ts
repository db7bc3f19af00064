// After a key rotation, every secret still sealed with a previous key (or in the format before key
// ids) is sealed again with the current one, with the secret a rotation replaced while it is valid,
// so the previous key can then leave WEBHOOK_PREVIOUS_SECRET_KEYS. Each goes through the command
// handler with the sealed values it read: of several processes resealing at once, one writes and the
// others find nothing left to do.
import { noRequest } from '../app/request-scope.js';
import type { Core } from '../app/core.js';
import type { SecretBox } from './secrets.js';
import { runSubscriptionCommand, secretContext, type SealedSecret, type SubscriptionReadModel } from './subscriptions.js';

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
  const stale = (s: SealedSecret): boolean => secrets.needsResealing(s.sealed) || (s.sealedPrevious !== null && secrets.needsResealing(s.sealedPrevious));
  for (const { workspaceId, id, secrets: clear, sealed, sealedPrevious } of directory.secrets().filter(stale)) {
    if (stopping()) break;
    const context = secretContext(workspaceId, id);
    // The previous secret of a rotation's grace period too (the directory leaves out one whose period is over).
    const previous = clear.previous === null || sealedPrevious === null ? {} : { previous: { from: sealedPrevious, to: secrets.encrypt(clear.previous.secret, context) } };
    try {
      const result = await runSubscriptionCommand(core, workspaceId, id, { kind: 'reseal', from: sealed, to: secrets.encrypt(clear.current, context), ...previous }, noRequest);
      // A refusal (deleted meanwhile) or no event (resealed by another process) is not ours to count.
      if (result._tag === 'Right' && result.right.records.length > 0) resealed += 1;
    } catch (error) {
      failed += 1;
      console.error(`webhook ${id}: sealing its secret with the current key failed (${(error as Error).message}); the next start tries again`);
    }
  }
  return { resealed, failed };
};
