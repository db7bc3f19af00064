// The document-store port behind the ticket, message and contact read models. A projection is pure:
// which document an event touches and how it evolves; a store keeps documents with the checkpoint.
// The embedded adapter is tickets-store-memory.ts (rebuilt from the log at start); a Redis adapter
// implements the same interface for the distributed mode.
import type { RecordedEvent } from '../src/log/event-log.js';

export type ProjectedEvent = Pick<RecordedEvent, 'type' | 'data' | 'workspaceId' | 'position'>;

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
  /** Position of the last event applied; 0 for an empty store. */
  checkpoint(): Promise<number>;
  get(key: string): Promise<D | undefined>;
  /** Stores the document (when given) and the checkpoint `position` together. */
  save(position: number, change?: { readonly key: string; readonly doc: D }): Promise<void>;
  list(query: ListQuery): Promise<Page<D>>;
  /** Every document by key, for rebuild comparisons. */
  dump(): Promise<ReadonlyMap<string, D>>;
}

export interface DocumentProjection<D> {
  readonly name: string;
  readonly types: readonly string[];
  /** Fields list queries filter on (a store may index them). */
  readonly filters: readonly string[];
  /** The document an event changes, or null. */
  keyOf(event: ProjectedEvent): string | null;
  evolve(doc: D | undefined, event: ProjectedEvent): D | undefined;
  partitionOf(doc: D): string;
}

/** The projection runner's apply: one event into one document, with the checkpoint. */
export const applier =
  <D>(projection: DocumentProjection<D>, store: DocumentStore<D>) =>
  async (event: ProjectedEvent): Promise<void> => {
    const key = projection.keyOf(event);
    const doc = key === null ? undefined : projection.evolve(await store.get(key), event);
    await store.save(event.position, key === null || doc === undefined ? undefined : { key, doc });
  };

/** A JSON field of event data as a string, or null. */
export const textOf = (value: unknown): string | null => (typeof value === 'string' ? value : null);
