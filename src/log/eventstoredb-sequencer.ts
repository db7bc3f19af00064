// The one sequencer (DESIGN.md "Offsets"): it follows $all in log order and gives each public event
// offset = max(clock µs, previous offset of its workspace + 1), appended as an entry to the
// workspace's index stream (eventstoredb-feed.ts). Offsets never come from the writers' clocks, and
// the server's `created` (a millisecond Date in the client) is not used.
//
// Each index append expects the index stream's revision read before, so a second sequencer running by
// mistake cannot interleave entries: the loser re-reads the index tail and skips events the winner
// already indexed (entries carry the position of their event, and both work in log order).
// Restart: the subscription resumes from a checkpoint written every CHECKPOINT_EVERY events and at
// stop; events between the checkpoint and the crash are seen again and skipped the same way. A lost
// connection is no restart: followAll resubscribes after the last event indexed.
import { BACKWARDS, END, NO_STREAM, START, WrongExpectedVersionError, excludeSystemEvents, jsonEvent, streamNameFilter } from '@eventstore/db-client';
import type { AllStreamResolvedEvent, AppendExpectedRevision, EventStoreDBClient, Position } from '@eventstore/db-client';
import { isPublicEventType } from '../domain/event-types.js';
import type { MicrosClock } from './clock.js';
import { decodeEvent, positionNumber } from './eventstoredb-codec.js';
import type { Naming, StoredEvent } from './eventstoredb-codec.js';
import { encodeFeedEntry, lastEntry } from './eventstoredb-feed.js';
import { readStreamOrEmpty } from './eventstoredb-reads.js';
import { followAll } from './eventstoredb-subscription.js';
import type { StartPosition } from './eventstoredb-subscription.js';

const CHECKPOINT_EVERY = 1000;
const CHECKPOINT_TYPE = 'feed.checkpoint';

export interface SequencerOptions {
  readonly client: EventStoreDBClient;
  readonly naming: Naming;
  /** Only streams with this prefix are the log's ('' for all). */
  readonly namespace: string;
  readonly clock: MicrosClock;
  /** Told about failures the sequencer recovers from by resubscribing (once per outage). */
  readonly onError: (error: unknown) => void;
}

export interface Sequencer {
  /** Resolves once every event up to commit position `commit` is indexed, or after `timeoutMs`. */
  readonly indexedUpTo: (commit: bigint, timeoutMs: number) => Promise<void>;
  readonly stop: () => Promise<void>;
}

/** Where a workspace's index stream ends. */
interface Tail {
  readonly offset: number;
  readonly position: bigint;
  readonly revision: AppendExpectedRevision;
}

const readCheckpoint = async (client: EventStoreDBClient, stream: string): Promise<Position | null> => {
  const [last] = await readStreamOrEmpty(client, stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
  const data = last?.event?.isJson === true ? (last.event.data as { commit?: unknown; prepare?: unknown }) : {};
  return typeof data.commit === 'string' && typeof data.prepare === 'string'
    ? { commit: BigInt(data.commit), prepare: BigInt(data.prepare) }
    : null;
};

export const startSequencer = ({ client, naming, namespace, clock, onError }: SequencerOptions): Sequencer => {
  const tails = new Map<string, Tail>();
  const waiters = new Set<{ readonly commit: bigint; readonly resolve: () => void }>();
  let processed: Position | null = null;
  let checkpointed: Position | null = null;
  let sinceCheckpoint = 0;
  let stopped = false;

  const tailOf = async (workspaceId: string): Promise<Tail> => {
    const known = tails.get(workspaceId);
    if (known !== undefined) return known;
    const last = await lastEntry(client, naming.feedStream(workspaceId));
    const tail: Tail =
      last === null
        ? { offset: 0, position: -1n, revision: NO_STREAM }
        : { offset: last.offset, position: BigInt(last.position), revision: last.indexRevision };
    tails.set(workspaceId, tail);
    return tail;
  };

  const index = async (event: StoredEvent, commit: bigint): Promise<void> => {
    const feed = naming.feedStream(event.workspaceId);
    for (;;) {
      const tail = await tailOf(event.workspaceId);
      if (commit <= tail.position) return; // indexed before a restart, or by another sequencer
      const offset = Math.max(clock(), tail.offset + 1);
      const entry = {
        offset,
        position: positionNumber(commit),
        stream: event.esdbStream,
        revision: Number(event.esdbRevision),
        eventId: event.id,
        type: event.type,
      };
      try {
        const result = await client.appendToStream(feed, encodeFeedEntry(entry), { expectedRevision: tail.revision });
        tails.set(event.workspaceId, { offset, position: commit, revision: result.nextExpectedRevision });
        return;
      } catch (error) {
        if (!(error instanceof WrongExpectedVersionError)) throw error;
        tails.delete(event.workspaceId);
      }
    }
  };

  const writeCheckpoint = async (): Promise<void> => {
    const at = processed;
    if (at === null || at === checkpointed) return;
    const data = { commit: at.commit.toString(), prepare: at.prepare.toString() };
    await client.appendToStream(naming.checkpointStream, jsonEvent({ type: CHECKPOINT_TYPE, data }));
    checkpointed = at;
    sinceCheckpoint = 0;
  };

  const handle = async (resolved: AllStreamResolvedEvent): Promise<void> => {
    const position = resolved.event?.position;
    if (position === undefined) return;
    const event = decodeEvent(resolved.event);
    if (event !== null && naming.portStream(event.esdbStream) !== null && isPublicEventType(event.type)) {
      await index(event, position.commit);
    }
    processed = position;
    for (const waiter of waiters) if (position.commit >= waiter.commit) waiter.resolve();
    sinceCheckpoint += 1;
    if (sinceCheckpoint >= CHECKPOINT_EVERY) await writeCheckpoint();
  };

  const filter = namespace === '' ? excludeSystemEvents() : streamNameFilter({ prefixes: [namespace] });

  // Read once, before the first subscription; a resubscription goes on from the last event handled.
  const fromCheckpoint = async (): Promise<StartPosition> => {
    processed = checkpointed = await readCheckpoint(client, naming.checkpointStream);
    // The checkpoint stream only needs its last event.
    await client.setStreamMetadata(naming.checkpointStream, { maxCount: 10 });
    return processed ?? START;
  };
  // Another sequencer may have indexed meanwhile, and a failed append may have been written.
  const following = followAll(client, { from: fromCheckpoint, filter, onResubscribe: () => tails.clear() }, handle, onError);

  return {
    indexedUpTo: (commit, timeoutMs) => {
      if (stopped || (processed !== null && processed.commit >= commit)) return Promise.resolve();
      return new Promise((resolve) => {
        const waiter = {
          commit,
          resolve: () => {
            clearTimeout(timer);
            waiters.delete(waiter);
            resolve();
          },
        };
        const timer = setTimeout(waiter.resolve, timeoutMs);
        waiters.add(waiter);
      });
    },
    stop: async () => {
      stopped = true;
      await following.stop();
      for (const waiter of waiters) waiter.resolve();
      await writeCheckpoint().catch(onError);
    },
  };
};
