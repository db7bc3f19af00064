// A delivery's steps as the aggregate decides them, with the states they lead to: what a dispatcher
// would record, for tests that build delivery streams or feed an index by hand; a subscription's
// stream of them in the log, or the packed records an index applies, and random histories of such
// records (fast-check); an index of each adapter to feed them to.
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Decided } from '../../src/domain/aggregate.js';
import { deliveryAggregate, foldDeliveries, packSteps, type Delivery, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { DELIVERY_INDEX_TYPES, type DeliveryIndex } from '../../projections/deliveries-index.js';
import { createMemoryDeliveryIndex } from '../../projections/deliveries-index-memory.js';
import { openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import type { ProjectedEvent } from '../../projections/tickets-store.js';

const redisUrl = process.env['REDIS_URL'];
/** The index adapters a test runs against: Redis with REDIS_URL. */
export const INDEX_ADAPTERS = ['sqlite', 'memory', ...(redisUrl === undefined ? [] : ['redis' as const])] as const;

/** An index of `adapter` for a test folder (Redis: keys of their own), bound to its stored data as its runner does before the first apply. */
export const openIndex = async (adapter: (typeof INDEX_ADAPTERS)[number], dir: string): Promise<DeliveryIndex> => {
  const index =
    adapter === 'sqlite'
      ? openSqliteDeliveryIndex({ file: join(dir, 'history.sqlite') })
      : adapter === 'memory'
        ? createMemoryDeliveryIndex()
        : // The properties apply an event at a time and wait for it: what they check does not depend on how applies are gathered.
          openRedisDeliveryIndex({ url: redisUrl as string, keyPrefix: `test:${Math.random().toString(16).slice(2)}:`, lingerMs: 0 });
  await index.checkpoint();
  return index;
};

export interface ScheduleOptions {
  readonly eventType?: string;
  readonly at?: number;
  readonly eventPosition?: number;
  readonly fannedOutThrough?: number;
  readonly replayId?: string;
}

/** `t0` (µs): when deliveries are scheduled unless told; attempts, cancels and retries come just after. */
export const deliverySteps = (t0: number) => {
  const states = new Map<string, Delivery>();
  const decide = (id: string, command: DeliveryCommand): Decided[] => {
    const result = deliveryAggregate.decide(command, states.get(id) ?? null);
    if (result._tag === 'Left') throw new Error(result.left.message);
    const next = result.right.reduce(deliveryAggregate.evolve, states.get(id) ?? null);
    if (next !== null) states.set(id, next);
    return [...result.right];
  };
  return {
    states,
    schedule: (subscriptionId: string, id: string, options: ScheduleOptions = {}) =>
      decide(id, {
        kind: 'schedule',
        deliveryId: id,
        subscriptionId,
        eventId: `event-${id}`,
        eventType: options.eventType ?? 'ticket.created',
        eventPosition: options.eventPosition ?? 1,
        fannedOutThrough: options.fannedOutThrough ?? 0,
        ...(options.replayId === undefined ? {} : { replayId: options.replayId }),
        at: options.at ?? t0,
      }),
    /** One attempt: delivered, failed for good (no retry left), or failed with a retry due (only the first attempt has one). */
    attempt: (id: string, outcome: 'delivered' | 'failed' | 'retry', at = t0 + 1) =>
      decide(id, {
        kind: 'record_attempt',
        attempt: (states.get(id)?.attempt ?? 0) + 1,
        outcome: { delivered: outcome === 'delivered', statusCode: outcome === 'delivered' ? 200 : 500, error: outcome === 'delivered' ? null : 'http 500', latencyMs: 3 },
        at,
        retryDelaysMs: outcome === 'retry' ? [30] : [],
      }),
    cancel: (id: string) => decide(id, { kind: 'cancel', reason: 'subscription_inactive', at: t0 + 2 }),
    retry: (id: string) => decide(id, { kind: 'retry', at: t0 + 3 }),
  };
};

/** Subscription `s`'s delivery steps (workspace `w`) appended to the log as a dispatcher records them. */
export const deliveryRecords = (log: EventLog) => {
  const steps = deliverySteps(10);
  let count = 0;
  return {
    ...steps,
    schedule: (id: string, options?: ScheduleOptions) => steps.schedule('s', id, options),
    /** Packed as a dispatcher records them; a manual retry is an event of its own type. */
    async append(decided: readonly Decided[]): Promise<void> {
      if (decided.length === 0) return;
      const events = decided[0]?.type === 'delivery.retry_requested' ? decided : [packSteps(decided)];
      await log.append(deliveryStream('s'), events.map((event) => ({ id: `r${(count += 1)}`, type: event.type, workspaceId: 'w', data: event.data })), 'any');
    },
  };
};

/** Every delivery of subscription `s` as a reading of its whole stream gives them. */
export const wholeStream = async (log: EventLog): Promise<Map<string, Delivery>> => foldDeliveries(await log.readStream(deliveryStream('s')));

/** One read of a stream through a `watched` log: where it started and how many records it returned. */
export interface StreamRead {
  readonly stream: string;
  readonly fromRevision: number;
  readonly records: number;
}

/** The log as it is, telling which revision each stream read started from (`from`), and each read whole once it returned (`reads`). */
export const watched = (log: EventLog) => {
  const from: number[] = [];
  const reads: StreamRead[] = [];
  const watching: EventLog = Object.assign(Object.create(log) as EventLog, {
    readStream: async (stream: string, fromRevision = 0) => {
      from.push(fromRevision);
      const records = await log.readStream(stream, fromRevision);
      reads.push({ stream, fromRevision, records: records.length });
      return records;
    },
  });
  return { log: watching, from, reads };
};

/** Feeds an index the log's delivery records as its indexer does, a chosen number at a time. */
export const indexFeeder = (log: EventLog, index: Pick<DeliveryIndex, 'apply'>) => {
  let applied = 0;
  return {
    /** Applies the next `count` delivery records of the log (all when omitted). */
    async applyNext(count = Infinity): Promise<void> {
      for (const event of (await log.readAll({ after: applied, types: DELIVERY_INDEX_TYPES })).slice(0, count)) {
        await index.apply(event);
        applied = event.position;
      }
    },
    /** Starts over from the log's first record (the index was cleared). */
    reset: () => void (applied = 0),
  };
};

const historyStep = fc.oneof(
  { arbitrary: fc.constant({ kind: 'schedule' as const }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('attempt' as const), pick: fc.nat(), delivered: fc.boolean() }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('retry' as const), pick: fc.nat() }), weight: 1 },
);

/** A record's worth of steps: schedules, attempts, cancels and manual retries, each on a delivery picked from those it fits. */
export const historyRecords = fc.array(fc.array(historyStep, { minLength: 1, maxLength: 3 }), { maxLength: 6 });

type HistoryRecords = typeof historyRecords extends fc.Arbitrary<infer R> ? R : never;

/** Appends the records `historyRecords` drew, deciding each step on the deliveries as they are by then; `next` names each new delivery. */
export const appendHistory = async (records: ReturnType<typeof deliveryRecords>, drawn: HistoryRecords, next: () => string): Promise<void> => {
  const pick = <T>(items: readonly T[], n: number): T | undefined => items[n % Math.max(1, items.length)];
  for (const record of drawn) {
    const decided: Decided[] = [];
    for (const s of record) {
      const all = [...records.states.values()];
      if (s.kind === 'schedule') decided.push(...records.schedule(next()));
      else if (s.kind === 'retry') {
        // A retry is a record of its own.
        const settled = pick(all.filter((d) => d.status === 'failed' || d.status === 'cancelled'), s.pick);
        if (settled !== undefined) await records.append(records.retry(settled.id));
      } else {
        const target = pick(all.filter((d) => d.status === 'waiting' && !decided.some((e) => e.data['delivery_id'] === d.id)), s.pick);
        if (target !== undefined) decided.push(...(s.kind === 'cancel' ? records.cancel(target.id) : records.attempt(target.id, s.delivered ? 'delivered' : 'retry')));
      }
    }
    await records.append(decided);
  }
};

export interface IndexedLog {
  log: SqliteEventLog;
  index: DeliveryIndex;
  feed: ReturnType<typeof indexFeeder>;
  /** Subscription `s`'s stream deleted and the index emptied, as at the start (a property's next run). */
  reset(): Promise<void>;
}

/** Registers hooks in the calling describe: for each test a fresh SQLite log, an index of `adapter` and its feeder, in a folder of its own, all let go after it. */
export const indexedLog = (adapter: (typeof INDEX_ADAPTERS)[number]): IndexedLog => {
  let dir = '';
  const world = {
    async reset() {
      await world.log.deleteStream(deliveryStream('s'));
      await world.index.clear();
      await world.index.checkpoint();
      world.feed.reset();
    },
  } as IndexedLog;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sp-indexed-log-'));
    world.log = openSqliteLog({ file: join(dir, 'events.sqlite'), durability: 'relaxed' });
    world.index = await openIndex(adapter, dir);
    world.feed = indexFeeder(world.log, world.index);
  });
  afterEach(async () => {
    await world.index.clear();
    await Promise.all([world.log.close(), world.index.close()]);
    rmSync(dir, { recursive: true, force: true });
  });
  return world;
};

/** Delivery records as a dispatcher writes them, one packed log event per call, with the states they lead to. */
export const deliveryLog = (t0: number) => {
  let position = 0;
  const revisions = new Map<string, number>();
  const event = (stream: string, type: string, data: ProjectedEvent['data']): ProjectedEvent => {
    const revision = revisions.get(stream) ?? 0;
    revisions.set(stream, revision + 1);
    position += 1;
    return { id: `e${position}`, type, data, workspaceId: 'ws', position, stream, revision };
  };
  const steps = deliverySteps(t0);
  return {
    ...steps,
    /** One packed record of a subscription's steps. */
    record: (subscriptionId: string, decided: readonly Decided[]): ProjectedEvent => {
      const packed = packSteps(decided);
      return event(deliveryStream(subscriptionId), packed.type, packed.data);
    },
    deleted: (subscriptionId: string): ProjectedEvent => event(subscriptionStream(subscriptionId), SUBSCRIPTION_EVENTS.deleted, {}),
  };
};
