// The document-store port behind the ticket, message and contact read models. A projection is pure:
// which document an event touches and how it evolves; a store keeps documents with the checkpoint.
// The embedded service keeps them in a SQLite file beside the log (tickets-store-sqlite.ts, resumed
// from its checkpoints at start); the Redis adapter (tickets-store-redis.ts) is the one store every
// API server of the distributed mode shares; tickets-store-memory.ts (rebuilt from the log at start)
// serves API servers without Redis, the rebuild script and tests.
import type { RecordedEvent } from '../src/log/event-log.js';

export type ProjectedEvent = Pick<RecordedEvent, 'id' | 'type' | 'data' | 'workspaceId' | 'position' | 'stream' | 'revision'>;

/** An event as a store's checkpoint: where it is in the log, and how to find it there again. */
export type EventRef = Pick<RecordedEvent, 'id' | 'position' | 'stream' | 'revision'>;

export interface ListQuery {
  /** Lists run within one partition: a workspace's tickets, a ticket's messages. */
  readonly partition: string;
  /** Equality filters on fields the projection names in `filters`. */
  readonly where?: Readonly<Record<string, string>>;
  /** Creation order, newest first or oldest first. */
  readonly newestFirst: boolean;
  /** From 1. */
  readonly page: number;
  readonly pageSize: number;
}

export interface Page<D> {
  readonly items: readonly D[];
  readonly total: number;
}

export interface DocumentStore<D> {
  /** The last event applied, null for an empty store. A runner reads it before it applies (a shared store binds to its data then). */
  checkpoint(): Promise<EventRef | null>;
  get(key: string): Promise<D | undefined>;
  /**
   * Applies `event`: the document at `key` (none when null) becomes `evolve` of the stored one
   * (undefined when absent; an undefined or identical result leaves it as it is), and the checkpoint
   * moves to the event. The caller may apply the next events before this call settles: a store
   * applies them in call order and settles them in that order (the Redis one writes them in batches).
   * Several processes may apply the same log to one shared store, each in log order: each event still
   * changes a document once. A store that lost its data, or cannot be reached, throws ProjectionReset
   * (src/app/projection-runner.ts): the runner starts again from checkpoint().
   */
  apply(event: EventRef, key: string | null, evolve: (doc: D | undefined) => D | undefined): Promise<void> | void;
  /** Drops every document and the checkpoint (the store was built from another log). */
  clear(): Promise<void>;
  list(query: ListQuery): Promise<Page<D>>;
  /** Every document by key, for rebuild comparisons. */
  dump(): Promise<ReadonlyMap<string, D>>;
}

export interface DocumentProjection<D> {
  readonly name: string;
  /**
   * Bumped whenever `evolve` or the document's shape changes: a store that outlives the process (Redis)
   * keeps each version apart, so a new version is built from the log beside the old one, which the
   * servers not yet upgraded go on using during a rolling deploy.
   */
  readonly version: number;
  readonly types: readonly string[];
  /** Fields list queries filter on (a store may index them). */
  readonly filters: readonly string[];
  /** The document an event changes, or null. */
  keyOf(event: ProjectedEvent): string | null;
  evolve(doc: D | undefined, event: ProjectedEvent): D | undefined;
  partitionOf(doc: D): string;
}

/** A store's read failed because the store cannot be reached (not because of what it holds). */
export class StoreUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailable';
  }
}

/** Where a process keeps its read models: memory (embedded) or the Redis every API server shares. */
export interface DocumentStores {
  open<D>(projection: Pick<DocumentProjection<D>, 'name' | 'version' | 'filters' | 'partitionOf'>): DocumentStore<D>;
  /** False while the stores cannot be reached: callers answer 503 instead of waiting. */
  available(): boolean;
  /** Whether the stores can be reached within `timeoutMs` (at start). */
  connected(timeoutMs: number): Promise<boolean>;
  /** Calls `listener` each time the stores can be reached again after an outage (their data may be gone). */
  onReconnect(listener: () => void): void;
  close(): Promise<void>;
}

/** The projection runner's apply: one event into one document, with the checkpoint. */
export const applier =
  <D>(projection: DocumentProjection<D>, store: DocumentStore<D>) =>
  (event: ProjectedEvent): Promise<void> | void =>
    store.apply(event, projection.keyOf(event), (doc) => projection.evolve(doc, event));

/** A JSON field of event data as a string, or null. */
export const textOf = (value: unknown): string | null => (typeof value === 'string' ? value : null);
