// The distributed EventLog: EventStoreDB (server 22.10 or later) through @eventstore/db-client 6.
//
// Mapping decisions (the helpers eventstoredb-*.ts hold the details):
// - Streams: port stream S is EventStoreDB stream `<namespace>S` (namespace '' in production; tests
//   use a random one because a real server keeps its data). Names starting with `$` or `feed-` are
//   reserved and rejected.
// - Event ids: 32 lowercase hex <-> UUID with dashes, losslessly. workspaceId and the port metadata
//   go into the event's JSON metadata as {workspaceId, metadata}; data is the JSON data.
// - Revisions: the server's 0-based bigint revisions as numbers, counted from the stream's first live
//   event (a soft-deleted stream written again goes on counting on the server; we start again at 0).
// - Positions: `position` is the event's commit position. Events appended through gRPC each have
//   commit === prepare, unique and increasing in $all order, so `after: p` reads from {commit: p,
//   prepare: p} (inclusive on the server; we skip p). Exact as a number up to 2^53 bytes of log.
//   `after` must be 0 or a position this adapter returned (the server cannot start mid-record).
// - Idempotence and expected revisions: append reads the stream first (eventstoredb-append.ts).
// - Offsets: one sequencer (option `sequencer: true`, one process at a time: in distributed mode the
//   relay/`all` role) follows $all and indexes public events into `feed-<namespace><workspaceId>`
//   streams (eventstoredb-sequencer.ts); readFeed reads that index (eventstoredb-feed.ts).
//   RecordedEvent.offset is set by readFeed only; append, readStream, readAll and subscribe return
//   null (finding it would cost an index lookup per event). watchFeed follows the index streams, so
//   it announces an event only once it is indexed, in any process.
// - deleteStream is a soft delete, so a stream can be written again. Stream reads hide deleted events
//   at once, $all keeps them until a scavenge: readAll, subscribe and headPosition drop events older
//   than their stream's first live event (one stream read per distinct stream and call, cached for a
//   subscription until it sees the stream's metadata change), readFeed drops entries whose event is
//   gone from its stream.
// - Subscriptions (subscribe, watchFeed, the sequencer) survive a lost connection or a server restart:
//   they resubscribe after the last event they handled (eventstoredb-subscription.ts). Their `done`
//   settles only on stop() or a failure of the consumer's handler, as on SQLite.
// - Reading $all needs a user allowed to (admin, or the connection string's default credentials).
import { BACKWARDS, END, EventStoreDBClient, FORWARDS, START, streamNameFilter } from '@eventstore/db-client';
import type { AllStreamResolvedEvent, SubscribeToAllOptions } from '@eventstore/db-client';
import { systemMicros } from './clock.js';
import type { MicrosClock } from './clock.js';
import { LogUnavailable } from './event-log.js';
import type { EventLog, FeedQuery, LogSubscription, ReadAllOptions, RecordedEvent } from './event-log.js';
import { candidateOf, lastPosition, liveRecord, readAllAfter } from './eventstoredb-all.js';
import type { AllFilter } from './eventstoredb-all.js';
import { appendEvents } from './eventstoredb-append.js';
import { decodeEvent, naming as namingFor, readPosition, toRecord } from './eventstoredb-codec.js';
import { readFeedFrom, watchFeedIndex } from './eventstoredb-feed.js';
import { isEventId } from './eventstoredb-ids.js';
import { baseCache, liveBase, readStreamOrEmpty } from './eventstoredb-reads.js';
import { startSequencer } from './eventstoredb-sequencer.js';
import type { Sequencer } from './eventstoredb-sequencer.js';
import { consumerCall, followAll } from './eventstoredb-subscription.js';

export interface EventStoreDbLogOptions {
  /** e.g. `esdb://admin:changeit@localhost:2113?tls=false`. */
  readonly connectionString: string;
  /** Prefix of every stream this log uses; '' (default) in production. */
  readonly namespace?: string;
  /** Run the offset sequencer in this process. Exactly one process of a deployment should. */
  readonly sequencer?: boolean;
  /** The sequencer's clock (µs); defaults to the system clock. */
  readonly clock?: MicrosClock;
  /**
   * readFeed in the sequencer's process first waits, up to this long, until the events in the log at
   * call time are indexed (read-your-writes for the feed). Other processes read what is indexed.
   */
  readonly feedWaitMs?: number;
  /**
   * Told about failures the sequencer and the subscriptions (subscribe, watchFeed) recover from by
   * resubscribing, once per outage each; defaults to console.error.
   */
  readonly onError?: (error: unknown) => void;
}

const unavailable = (error: unknown): LogUnavailable =>
  new LogUnavailable(`cannot use EventStoreDB: ${error instanceof Error ? error.message : String(error)}`, { cause: error });

const connect = (connectionString: string): EventStoreDBClient => {
  try {
    return EventStoreDBClient.connectionString(connectionString);
  } catch (error) {
    throw unavailable(error);
  }
};

const escapeRegex = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export const openEventStoreDbLog = async (options: EventStoreDbLogOptions): Promise<EventLog> => {
  const namespace = options.namespace ?? '';
  const names = namingFor(namespace);
  const client = connect(options.connectionString);
  const reportAs =
    (what: string) =>
    (error: unknown): void =>
      options.onError === undefined ? console.error(`eventstoredb ${what}:`, error) : options.onError(error);
  try {
    // Fails now, not at the first request, when the server is unreachable or $all is not readable.
    await client.readAll({ direction: FORWARDS, fromPosition: START, maxCount: 1 }).toArray();
  } catch (error) {
    await client.dispose();
    throw unavailable(error);
  }

  const sequencer: Sequencer | null = options.sequencer
    ? startSequencer({
        client,
        naming: names,
        namespace,
        clock: options.clock ?? systemMicros,
        onError: reportAs('sequencer'),
      })
    : null;

  /** The last event of this log in $all, deleted or not: what the sequencer must have indexed. */
  const lastLogged = (): Promise<number> =>
    lastPosition(client, async (resolved) => {
      const candidate = candidateOf(names, {}, resolved);
      return candidate === null ? null : toRecord(candidate.event, candidate.stream, 0n, null);
    });

  const subscriptions = new Set<LogSubscription>();
  const tracked = (subscription: LogSubscription): LogSubscription => {
    subscriptions.add(subscription);
    const forget = (): void => void subscriptions.delete(subscription);
    void subscription.done.then(forget, forget);
    return subscription;
  };

  // Only this namespace's streams and their metadata streams (deletions) reach the subscriber.
  const subscriptionFilter = (): Pick<SubscribeToAllOptions, 'filter'> =>
    namespace === '' ? {} : { filter: streamNameFilter({ regex: `^(\\$\\$)?${escapeRegex(namespace)}` }) };

  return {
    append: async (stream, events, expected) => {
      const esdbStream = names.esdbStream(stream);
      const badId = events.find((event) => !isEventId(event.id));
      if (badId !== undefined) throw new TypeError(`event id must be 32 lowercase hex characters: ${JSON.stringify(badId.id)}`);
      return appendEvents(client, esdbStream, stream, events, expected);
    },

    readStream: async (stream, fromRevision = 0) => {
      const esdbStream = names.esdbStream(stream);
      const base = await liveBase(client, esdbStream);
      if (base === null) return [];
      const resolved = await readStreamOrEmpty(client, esdbStream, { fromRevision: base + BigInt(fromRevision) });
      return resolved.flatMap((r) => {
        const event = decodeEvent(r.event);
        return event === null ? [] : [toRecord(event, stream, base, null)];
      });
    },

    lastRevision: async (stream) => {
      const esdbStream = names.esdbStream(stream);
      const base = await liveBase(client, esdbStream);
      if (base === null) return null;
      const [last] = await readStreamOrEmpty(client, esdbStream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
      const raw = last?.event?.revision;
      return raw === undefined ? null : Number(raw - base);
    },

    readAll: (readOptions: ReadAllOptions) => readAllAfter(client, names, baseCache(client), readOptions),

    subscribe: (subscribeOptions, handler): LogSubscription => {
      let bases = baseCache(client);
      const filter: AllFilter = subscribeOptions;
      const from = readPosition(subscribeOptions.after);
      // Deletions made while it was down reach it again as metadata events after the resume position;
      // starting a resubscription with no cached base does not rely on that.
      const onResubscribe = (): void => {
        bases = baseCache(client);
      };
      const handle = async (resolved: AllStreamResolvedEvent): Promise<void> => {
        const event = resolved.event;
        if (event === undefined) return;
        if (event.streamId.startsWith('$$')) {
          // Metadata changed (a soft delete, or a write after one): look the stream's base up again.
          bases.forget(event.streamId.slice(2));
          return;
        }
        const candidate = candidateOf(names, filter, resolved);
        const record = candidate === null ? null : await liveRecord(bases, candidate);
        if (record !== null) await consumerCall(() => handler(record));
      };
      return tracked(followAll(client, { from, ...subscriptionFilter(), onResubscribe }, handle, reportAs('subscription')));
    },

    deleteStream: async (stream) => {
      const esdbStream = names.esdbStream(stream);
      // Only existing streams: a delete of a missing one would still write its metadata.
      if ((await liveBase(client, esdbStream)) !== null) await client.deleteStream(esdbStream);
    },

    readFeed: async (query: FeedQuery): Promise<RecordedEvent[]> => {
      if (sequencer !== null) await sequencer.indexedUpTo(BigInt(await lastLogged()), options.feedWaitMs ?? 2000);
      return readFeedFrom(client, names, query);
    },

    watchFeed: async (handler) => tracked(await watchFeedIndex(client, names, handler, reportAs('feed watch'))),

    headPosition: () => {
      const bases = baseCache(client);
      return lastPosition(client, async (resolved) => {
        const candidate = candidateOf(names, {}, resolved);
        return candidate === null ? null : liveRecord(bases, candidate);
      });
    },

    close: async () => {
      // Before dispose(), which would end their calls: they would resubscribe.
      await Promise.all([...subscriptions].map((subscription) => subscription.stop()));
      await sequencer?.stop();
      await client.dispose();
    },
  };
};
