// The EventLog port: the source of truth. Every adapter (log/sqlite.ts, log/eventstoredb.ts) passes
// the one contract suite in test/log/event-log.contract.ts.

/** JSON values as stored in the log. */
export type Json = null | boolean | number | string | readonly Json[] | { readonly [k: string]: Json };
export type JsonObject = { readonly [k: string]: Json };

/** An event to append. `id` is 32 lowercase hex characters and unique in the whole log. */
export interface NewEvent {
  readonly id: string;
  readonly type: string;
  readonly workspaceId: string;
  readonly data: JsonObject;
  readonly metadata?: JsonObject;
}

/**
 * A recorded event. `revision` is 0-based within its stream; `position` is the global log position
 * (1-based, strictly increasing in log order). `offset` is the per-workspace microsecond offset of a
 * public event (null for internal events, and for public events not yet sequenced where the
 * sequencer runs apart from the writer).
 */
export interface RecordedEvent extends NewEvent {
  readonly stream: string;
  readonly revision: number;
  readonly position: number;
  readonly metadata: JsonObject;
  readonly offset: number | null;
}

/** `any`: no check; `no_stream`: the stream must not exist; a number: the stream's last revision must be it. */
export type ExpectedRevision = 'any' | 'no_stream' | number;

export interface AppendResult {
  /** Revision of the stream's last event after the append. */
  readonly nextRevision: number;
  /** The recorded events of this call, in order (for an idempotent re-append: the records already stored). */
  readonly records: readonly RecordedEvent[];
}

/** One stream's part of an append to several streams at once. */
export interface StreamAppend {
  readonly stream: string;
  readonly events: readonly NewEvent[];
  readonly expected: ExpectedRevision;
}

export interface ReadAllOptions {
  /** Exclusive: events with position > after. 0 reads from the start. */
  readonly after: number;
  readonly limit?: number;
  readonly types?: readonly string[];
  readonly workspaceId?: string;
}

export interface SubscribeOptions extends Omit<ReadAllOptions, 'limit'> {
  /**
   * Told the position through which the log has looked, when that is past the last event handed to
   * the handler (the filter left the rest out): every matching event up to it has been handled. Only
   * logs whose `reportsScanned` is true call it.
   */
  readonly scanned?: (position: number) => void;
}

export interface FeedQuery {
  readonly workspaceId: string;
  /** Inclusive: events with offset >= fromOffset. */
  readonly fromOffset: number;
  readonly types?: readonly string[];
  readonly limit: number;
}

export interface LogSubscription {
  /** Stops delivery; resolves once the handler is no longer running. */
  stop(): Promise<void>;
  /** Resolves when the subscription stops (stop() or handler failure; then it rejects). */
  readonly done: Promise<void>;
}

export interface EventLog {
  /**
   * Atomic per call. Rejects with WrongExpectedRevision when `expected` does not hold. Events whose
   * id is already in the log are not appended again: a call whose events are all known returns the
   * stored records without checking `expected` (a safe client retry).
   */
  append(stream: string, events: readonly NewEvent[], expected: ExpectedRevision): Promise<AppendResult>;
  /**
   * Several streams' appends in one commit, all or none: each part as `append` would make it, in
   * order; the first part that fails rejects the call (WrongExpectedRevision names its stream) and
   * none is written. Only logs that can commit several streams atomically have it (SQLite, not
   * EventStoreDB): callers without it append one stream after the other.
   */
  appendAll?(parts: readonly StreamAppend[]): Promise<AppendResult[]>;
  /** The stream forwards from `fromRevision` (inclusive, default 0); empty when it does not exist. */
  readStream(stream: string, fromRevision?: number): Promise<RecordedEvent[]>;
  /** The revision of the stream's last event, null when it has none: without reading its events. */
  lastRevision(stream: string): Promise<number | null>;
  /** Everything after a global position, in log order, optionally filtered. */
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * Catch-up then live: calls `handler` for every event with position > after (filtered as readAll),
   * in log order, one at a time, awaiting each call.
   */
  subscribe(options: SubscribeOptions, handler: (event: RecordedEvent) => Promise<void> | void): LogSubscription;
  /**
   * Whether subscribe tells `scanned` positions: a reader that keeps its place in the whole log (a
   * projection's checkpoint) can then ask for the types it reads alone, without losing its place.
   */
  readonly reportsScanned?: boolean;
  /**
   * Deletes a stream; its events disappear from every read. Deleting a missing stream is a no-op.
   * A long stream may go in steps, newest events first: a reader meanwhile meets an earlier state of
   * it, never one with a gap. Once this resolves the stream is empty, and appends to it start again
   * at revision 0.
   */
  deleteStream(stream: string): Promise<void>;
  /** One workspace's public, sequenced events by offset, in offset order. */
  readFeed(query: FeedQuery): Promise<RecordedEvent[]>;
  /**
   * Long-poll wake-ups, in any process using the log: once the returned promise resolves, calls
   * `handler` for each public event as soon as readFeed can return it, with its workspace and offset,
   * once each, in offset order per workspace, one call at a time (awaiting each). Events readFeed
   * could already return at the call are not announced.
   */
  watchFeed(handler: (workspaceId: string, offset: number) => Promise<void> | void): Promise<LogSubscription>;
  /** The global position of the last event (0 when empty). */
  headPosition(): Promise<number>;
  close(): Promise<void>;
}

export class WrongExpectedRevision extends Error {
  constructor(
    readonly stream: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | 'no_stream',
  ) {
    super(`wrong expected revision on ${stream}: expected ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevision';
  }
}

/** Raised at open when the log cannot be used (corrupt or foreign file, read-only folder, locked by another process). */
export class LogUnavailable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'LogUnavailable';
  }
}
