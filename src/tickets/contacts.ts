// Contact commands: upsert by telegram_id/email (race-free through the identity streams of
// domain/contact/identity.ts), block/unblock and the throttled visitor.reply_waiting.
// A new person (none of the identifiers claimed yet) is registered with the claims of all its
// identifiers in one commit where the log can append several streams at once: one durable round
// instead of one per identifier plus one for the contact. An identifier claimed meanwhile (another
// API server) fails that commit whole, and the upsert goes the step-by-step way below.
import type { Either } from 'fp-ts/lib/Either.js';
import type { Appender, CommandResult } from '../app/command-handler.js';
import type { Core } from '../app/core.js';
import type { RequestScope } from '../app/request-scope.js';
import { createBoundedCache } from '../shared/bounded-cache.js';
import { contactAggregate, contactStream, type ContactCommand, type ContactFields, type ContactState } from '../domain/contact/contact.js';
import { CONTACT_IDENTITY_CLAIMED, identityKeys, identityStream, normalizeEmail, type IdentityKey } from '../domain/contact/identity.js';
import type { DomainError } from '../domain/errors.js';
import { WrongExpectedRevision, type StreamAppend } from '../log/event-log.js';
import { createKeyedLock, lockAll } from '../shared/keyed-lock.js';

export type ContactResult = Either<DomainError, CommandResult<ContactState> & { readonly contactId: string }>;

type Variant<C> = C extends unknown ? Omit<C, 'contactId' | 'workspaceId' | 'now'> : never;

/** Identity streams whose final owner this process keeps (an identifier and a contact id each). */
const CACHED_IDENTITIES = 10_000;

/** An identifier and its stream (named by a hash). */
interface Identity {
  readonly key: IdentityKey;
  readonly stream: string;
}

/** One of the identifiers a new contact was registered with was claimed meanwhile: nothing was written. */
class IdentityTaken extends Error {}

export const createContactCommands = (core: Core) => {
  const identityLock = createKeyedLock();
  // Final owners only: a claim is re-pointed at most once (revision 1), and only by the call that
  // made it (below), so an owner is final at revision 1, or once the call that claimed it is done.
  const finalOwners = createBoundedCache<string>(CACHED_IDENTITIES);
  // Stream names hash their identifier: kept for the identifiers seen last, as their owners are.
  const streamNames = createBoundedCache<string>(CACHED_IDENTITIES);
  const streamOf = (workspaceId: string, key: IdentityKey): string => {
    const cacheKey = `${workspaceId}\0${key.kind}\0${key.value}`;
    let stream = streamNames.get(cacheKey);
    if (stream === undefined) streamNames.set(cacheKey, (stream = identityStream(workspaceId, key)));
    return stream;
  };

  /** The identifier's contact: the last claim of its stream. */
  const ownerOf = async ({ stream }: Identity): Promise<string | null> => {
    const known = finalOwners.get(stream);
    if (known !== undefined) return known;
    const last = (await core.log.readStream(stream)).at(-1);
    if (last === undefined) return null;
    const owner = String(last.data['contact_id']);
    if (last.revision >= 1) finalOwners.set(stream, owner);
    return owner;
  };

  const claimEvent = (workspaceId: string, key: IdentityKey, contactId: string) => ({
    id: core.newId(),
    type: CONTACT_IDENTITY_CLAIMED,
    workspaceId,
    data: { contact_id: contactId, kind: key.kind },
  });

  /**
   * Claims the identifier for `proposed`, noting it in `mine`; when another upsert got there first,
   * returns its contact.
   */
  const claim = async (
    workspaceId: string,
    identity: Identity,
    proposed: string,
    mine: Map<string, string>,
    expected: 'no_stream' | 0 = 'no_stream',
  ): Promise<string> => {
    const { key, stream } = identity;
    try {
      await core.log.append(stream, [claimEvent(workspaceId, key, proposed)], expected);
      mine.set(stream, proposed);
      return proposed;
    } catch (error) {
      const owner = error instanceof WrongExpectedRevision ? await ownerOf(identity) : null;
      if (owner === null) throw error;
      return owner;
    }
  };

  /**
   * The contact owning any of the identifiers (telegram_id first), claiming the unclaimed ones for it.
   * When this call starts a new contact but a concurrent call has meanwhile given one of the other
   * identifiers a contact, it adopts that contact and re-points the identifiers it had just claimed
   * (expected revision 0: only its own fresh claim is replaced), so both calls end on one contact.
   */
  const contactIdOf = async (workspaceId: string, identities: readonly Identity[], owners: readonly (string | null)[], scope: RequestScope | undefined): Promise<string> => {
    let contactId = owners.find((o) => o !== null) ?? null;
    let fresh: Identity[] = [];
    const mine = new Map<string, string>();
    for (const [i, identity] of identities.entries()) {
      if (owners[i] !== null) continue;
      const proposed = contactId ?? core.resourceId('contact', scope);
      const owner = await claim(workspaceId, identity, proposed, mine);
      if (contactId === null) {
        contactId = owner;
        if (owner === proposed) fresh.push(identity);
      } else if (owner === contactId) {
        if (fresh.length > 0) fresh.push(identity);
      } else if (fresh.length > 0) {
        for (const repointed of fresh) await claim(workspaceId, repointed, owner, mine, 0);
        fresh = [];
        contactId = owner;
      }
    }
    if (contactId === null) throw new Error('a contact needs telegram_id or email');
    // This call is done: its claims will not be re-pointed any more.
    mine.forEach((owner, stream) => finalOwners.set(stream, owner));
    return contactId;
  };

  const run = async (workspaceId: string, contactId: string, command: Variant<ContactCommand>, scope: RequestScope | undefined, appender?: Appender): Promise<ContactResult> => {
    const full = { ...command, contactId, workspaceId, now: core.clock() } as ContactCommand;
    const result = await core.handle(contactAggregate, contactStream(contactId), workspaceId, full, scope, appender);
    return result._tag === 'Left' ? result : { _tag: 'Right', right: { ...result.right, contactId } };
  };

  /**
   * Registers a new contact with the claims of all its identifiers, in one commit; null when the log
   * cannot append several streams at once, or one of the identifiers was claimed meanwhile (nothing
   * was written then).
   */
  const registerWithClaims = async (
    workspaceId: string,
    identities: readonly Identity[],
    command: Variant<ContactCommand>,
    scope: RequestScope | undefined,
  ): Promise<ContactResult | null> => {
    const appendAll = core.log.appendAll?.bind(core.log);
    if (appendAll === undefined) return null;
    const contactId = core.resourceId('contact', scope);
    const claims: StreamAppend[] = identities.map(({ key, stream }) => ({ stream, events: [claimEvent(workspaceId, key, contactId)], expected: 'no_stream' }));
    let claimed = false;
    const withClaims: Appender = async (stream, events, expected) => {
      try {
        const appended = await appendAll([...claims, { stream, events, expected }]);
        claimed = true;
        return appended.at(-1) as (typeof appended)[number];
      } catch (error) {
        // Not WrongExpectedRevision: the command handler would take it for a race on the contact's own stream.
        if (error instanceof WrongExpectedRevision && claims.some((c) => c.stream === error.stream)) throw new IdentityTaken();
        throw error;
      }
    };
    try {
      const saved = await run(workspaceId, contactId, command, scope, withClaims);
      // A new contact is always registered (an event), so its appender ran; checked all the same.
      if (!claimed) throw new Error(`contact ${contactId}: registered without its identifiers`);
      // This call is done: its claims will not be re-pointed.
      claims.forEach((c) => finalOwners.set(c.stream, contactId));
      return saved;
    } catch (error) {
      if (error instanceof IdentityTaken) return null;
      throw error;
    }
  };

  return {
    /** Creates or updates the contact known by telegram_id or email; the caller checks one is given. */
    async save(workspaceId: string, fields: Partial<ContactFields>, via: 'api' | 'widget', scope: RequestScope | undefined): Promise<ContactResult> {
      const normalized = {
        ...fields,
        ...(typeof fields.email === 'string' ? { email: normalizeEmail(fields.email) } : {}),
        ...(typeof fields.telegram_id === 'string' ? { telegram_id: fields.telegram_id.trim() } : {}),
      };
      const identities = identityKeys(normalized).map((key) => ({ key, stream: streamOf(workspaceId, key) }));
      const command = { kind: 'save', fields: normalized, via } as const;
      // Every identifier belongs for good to one contact: nothing to claim, so no identity lock to
      // take. Concurrent saves of a known contact then queue on its own stream and are decided
      // together, where the lock ran them one at a time (each read the stream, and waited for a
      // commit of its own when it changed a field).
      const known = identities.map(({ stream }) => finalOwners.get(stream));
      const owner = known[0];
      if (owner !== undefined && known.every((other) => other === owner)) return run(workspaceId, owner, command, scope);
      // Upserts sharing an identifier run one at a time in this process, so two identifiers claimed
      // by concurrent calls cannot split one person into two contacts; across API servers the
      // identity streams still agree on each identifier (and re-point a fresh claim, above).
      return lockAll(identityLock, identities.map((i) => i.stream), async () => {
        let owners = await Promise.all(identities.map(ownerOf));
        if (owners.every((owner) => owner === null)) {
          const registered = await registerWithClaims(workspaceId, identities, command, scope);
          if (registered !== null) return registered;
          owners = await Promise.all(identities.map(ownerOf));
        }
        return run(workspaceId, await contactIdOf(workspaceId, identities, owners, scope), command, scope);
      });
    },
    run,
  };
};

export type ContactCommands = ReturnType<typeof createContactCommands>;

export const hasIdentity = (fields: Partial<ContactFields> | undefined): boolean => identityKeys(fields ?? {}).length > 0;
