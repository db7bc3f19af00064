// How port events, streams and positions are laid out in EventStoreDB (see the decision list at the
// top of eventstoredb.ts). Pure: no I/O.
import { jsonEvent } from '@eventstore/db-client';
import type { EventData, RecordedEvent as EsdbRecordedEvent } from '@eventstore/db-client';
import type { JsonObject, NewEvent, RecordedEvent } from './event-log.js';
import { eventIdToUuid, uuidToEventId } from './eventstoredb-ids.js';

/** Prefix of the adapter's own streams (feed index, sequencer checkpoint) in every namespace. */
export const INTERNAL_PREFIX = 'feed-';

export interface Naming {
  /** The EventStoreDB stream of a port stream; throws for names the adapter reserves. */
  readonly esdbStream: (stream: string) => string;
  /** The port stream of an EventStoreDB stream; null for system, internal or other-namespace streams. */
  readonly portStream: (esdbStream: string) => string | null;
  readonly feedStream: (workspaceId: string) => string;
  /** What every feed stream's name (and the checkpoint stream's) starts with. */
  readonly feedPrefix: string;
  /** The workspace of a feed stream; null for any other stream. */
  readonly feedWorkspace: (esdbStream: string) => string | null;
  readonly checkpointStream: string;
}

/**
 * `namespace` prefixes every stream the adapter writes, so test runs against a long-lived server
 * never see each other's events (production uses '').
 */
export const naming = (namespace: string): Naming => {
  const feedPrefix = `${INTERNAL_PREFIX}${namespace}`;
  return {
    esdbStream: (stream) => {
      const name = namespace + stream;
      if (stream === '' || name.startsWith('$') || name.startsWith(INTERNAL_PREFIX)) {
        throw new TypeError(`stream name ${JSON.stringify(stream)} is reserved in EventStoreDB`);
      }
      return name;
    },
    portStream: (esdbStream) =>
      esdbStream.startsWith('$') || esdbStream.startsWith(INTERNAL_PREFIX) || !esdbStream.startsWith(namespace)
        ? null
        : esdbStream.slice(namespace.length),
    feedStream: (workspaceId) => feedPrefix + workspaceId,
    feedPrefix,
    feedWorkspace: (esdbStream) => {
      const workspaceId = esdbStream.startsWith(feedPrefix) ? esdbStream.slice(feedPrefix.length) : '';
      return workspaceId === '' || workspaceId.startsWith('$') ? null : workspaceId;
    },
    // '$' cannot start a workspace id we issue, so this never collides with a feed.
    checkpointStream: `${feedPrefix}$sequencer`,
  };
};

/** What we keep in EventStoreDB's per-event metadata. */
interface StoredMetadata {
  readonly workspaceId: string;
  readonly metadata: JsonObject;
}

export const encodeEvent = (event: NewEvent): EventData =>
  jsonEvent({
    id: eventIdToUuid(event.id),
    type: event.type,
    data: event.data,
    metadata: { workspaceId: event.workspaceId, metadata: event.metadata ?? {} } satisfies StoredMetadata,
  });

const isObject = (value: unknown): value is JsonObject =>
  typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);

const isStoredMetadata = (value: unknown): value is StoredMetadata =>
  isObject(value) && typeof value['workspaceId'] === 'string' && isObject(value['metadata']);

/** Revisions are EventStoreDB's own (bigint, raw: they go on counting after a soft delete). */
export interface StoredEvent extends Omit<RecordedEvent, 'stream' | 'revision' | 'position' | 'offset'> {
  readonly esdbStream: string;
  readonly esdbRevision: bigint;
  /** The commit position; null when the server did not send one (stream reads before 22.6). */
  readonly commit: bigint | null;
}

// Stream reads of servers before 22.6 send 0 or 2^64 - 1 for "no position" (no event of ours sits
// at 0: the server writes its own records first).
const hasPosition = (commit: bigint | undefined): commit is bigint => commit !== undefined && commit > 0n && commit < 2n ** 63n;

/** An event this adapter wrote, or null for anything else ($-events, other applications' events). */
export const decodeEvent = (event: EsdbRecordedEvent | undefined): StoredEvent | null => {
  if (event === undefined || !event.isJson || !isObject(event.data) || !isStoredMetadata(event.metadata)) return null;
  const id = uuidToEventId(event.id);
  if (id === null) return null;
  const commit = event.position?.commit;
  return {
    id,
    type: event.type,
    workspaceId: event.metadata.workspaceId,
    data: event.data,
    metadata: event.metadata.metadata,
    esdbStream: event.streamId,
    esdbRevision: event.revision,
    commit: hasPosition(commit) ? commit : null,
  };
};

/**
 * Our `position` is the commit position. Events written through gRPC (single-batch appends) each have
 * commit === prepare, unique and increasing in log order; it fits a double exactly up to 2^53 bytes
 * (8 PiB) of log.
 */
export const positionNumber = (commit: bigint): number => {
  if (commit > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError(`log position ${commit} exceeds 2^53`);
  return Number(commit);
};

/** The $all position to read from for a port position (0 means the start). */
export const readPosition = (position: number): { commit: bigint; prepare: bigint } | 'start' =>
  position <= 0 ? 'start' : { commit: BigInt(position), prepare: BigInt(position) };

/**
 * The port record of a stored event. `base` is the raw revision of the stream's first live event
 * (0 unless the stream was deleted and written again).
 */
export const toRecord = (event: StoredEvent, stream: string, base: bigint, offset: number | null): RecordedEvent => {
  if (event.commit === null) {
    throw new Error('EventStoreDB sent no event position: the adapter needs server version 22.10 or later');
  }
  return {
    id: event.id,
    type: event.type,
    workspaceId: event.workspaceId,
    data: event.data,
    metadata: event.metadata,
    stream,
    revision: Number(event.esdbRevision - base),
    position: positionNumber(event.commit),
    offset,
  };
};
