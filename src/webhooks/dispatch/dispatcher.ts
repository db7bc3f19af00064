// The dispatcher core: fan-out of sequenced public events into deliveries, and the attempts.
// Independent of how events arrive (a log tail embedded, a Kafka consumer distributed): fanOut()
// only records deliveries and queues their first attempt; workers (the pump) take due attempts from
// the RetrySchedule. The in-memory state holds only deliveries still waiting; the log holds the rest.
// With a schedule shared by several dispatchers (distributed mode), whoever claims an attempt owns
// the delivery for that attempt: it reads the delivery back from the log, and lets go of it once the
// next attempt is handed back to the schedule, since another dispatcher may take that one. Only the
// owner moves an entry (put); a dispatcher announcing a delivery it does not own offers it. What it put
// it keeps for a while (own-puts.ts): claiming that entry back untouched, it skips the log. With its
// own schedule it may park what it need not hold (`parking`, parking.ts): held memory then follows
// what is due soon, not what waits.
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import type { Decided } from '../../domain/aggregate.js';
import { deliveryAggregate, foldDeliveries, type Delivery, type DeliveryCommand } from '../../domain/delivery/delivery.js';
import { deliveryIdOf, deliveryStream, legacyDeliveryIdOf, replayDeliveryIdOf } from '../../domain/delivery/ids.js';
import { isPublicEventType } from '../../domain/event-types.js';
import type { MicrosClock } from '../../log/clock.js';
import type { EventLog, RecordedEvent } from '../../log/event-log.js';
import type { DeliveryAsOf, DeliveryKey, WaitingReader } from '../../../projections/deliveries-index.js';
import { createBoundedCache } from '../../shared/bounded-cache.js';
import { createKeyedLock } from '../../shared/keyed-lock.js';
import type { AttemptOutcome, Sender } from '../sender.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../subscriptions.js';
import type { DeliveryBacklog } from './backlog.js';
import { bodyAtPosition, envelopeBytes } from './bodies.js';
import { replayFirstsNow } from './delivery-now.js';
import { createOwnPuts } from './own-puts.js';
import type { ParkedAttempt, ParkingLot } from './parking.js';
import { createPump } from './pump.js';
import { createPunctuality, type AttemptKind, type PunctualityFigures } from './punctuality.js';
import { createRecorder } from './recorder.js';
import { readDeliveryHistory } from './restore.js';
import { deleteHistoriesMeanwhile, deleteSubscriptionHistory } from './subscription-history.js';
import type { DueAttempt, RetrySchedule, SharedRetrySchedule } from './retry-schedule.js';
import { sharedPerTurn } from './subscription-logged.js';
import { DELETION_WAIT_MS } from './deletion-notices.js';
import { watchEventLoopTurns } from '../../shared/event-loop-turns.js';
import { createWaitingDeliveries, type WaitingView } from './waiting.js';

export type DeliveryReport = { readonly kind: 'record_delivery_failed' | 'record_delivery_succeeded'; readonly deliveryId: string; readonly round: number };

export interface DispatcherDeps {
  readonly log: EventLog;
  readonly subscriptions: SubscriptionDirectory;
  readonly sender: Sender;
  /** This dispatcher's own schedule (memory), or one it shares with other dispatchers (Redis). */
  readonly schedule: { readonly own: RetrySchedule } | { readonly shared: SharedRetrySchedule };
  /** Counts a failed delivery on the subscription (the 5th in a row deactivates it) or resets the count. Idempotent per delivery id. */
  readonly report: (workspaceId: string, subscriptionId: string, report: DeliveryReport) => Promise<void>;
  readonly clock: MicrosClock;
  readonly retryDelaysMs: readonly number[];
  readonly maxInFlight: number;
  readonly maxInFlightPerSubscription: number;
  readonly maxInFlightPerWorkspace: number;
  /** Where deliveries this dispatcher does not hold are read; default: the log, whole (recordsFromLog). */
  readonly records?: DeliveryRecords;
  /**
   * Null while a DELETE can reach this dispatcher, else what its attempts wait for before they look
   * at the log (DeletionListener.reachable): a DELETE answered after that look waits for this one.
   */
  readonly reachable?: () => Promise<void> | null;
  /** Own schedule only: where attempts not held in memory wait (parking.ts); the dispatcher closes it at stop. */
  readonly parking?: Parking;
  /** How old what an attempt knows of the log may be when it is written (default LOOK_VALID_MS; `tooOld`). */
  readonly lookValidMs?: number;
  /** A subscription's waiting deliveries kept for take-overs at most, where the records have an index (waiting.ts; default WAITING_KEPT). */
  readonly waitingKept?: number;
}

export interface Parking {
  readonly lot: ParkingLot;
  /**
   * Retries due later than this are parked. The lot is looked at four times per horizon, so a retry
   * is held again at least three quarters of it before it is due.
   */
  readonly horizonMs: number;
  /**
   * Deliveries held in all past which the attempts of subscriptions holding more than
   * `heldPerSubscription` are parked, whenever due (a quiet subscription is never parked behind a busy
   * one's backlog). Taken back, earliest first, while fewer than half of `maxHeld` are held or their
   * subscription holds under half its share.
   */
  readonly maxHeld: number;
  readonly heldPerSubscription: number;
}

/** Half the bound a DELETE waits for the dispatchers that do not acknowledge it (the clocks of two hosts may drift apart a little). */
export const LOOK_VALID_MS = DELETION_WAIT_MS / 2;

/** An attempt not written: it looks at the log again. */
const WITHHELD = Symbol('withheld');

/** Attempts parked, taken back, cancelled or dropped in one go, at most (one transaction of the lot, one read of the deliveries per subscription, one page of the index). */
const PARKING_BATCH = 1_000;

/** A delivery read back from the log after a restart. */
export interface RestoredDelivery {
  readonly delivery: Delivery;
  readonly workspaceId: string;
}

/**
 * Where a dispatcher reads deliveries it does not hold: the log by default, whole (every delivery
 * record, a subscription's whole stream); the distributed mode with Redis reads the delivery-history
 * index instead (src/webhooks/dispatch/shared-history.ts), so none of these grows with the history.
 */
export interface DeliveryRecords {
  /** Every delivery still waiting, read as it is iterated where the source pages them: a lost shared schedule is re-seeded from them. */
  waiting(): AsyncIterable<RestoredDelivery>;
  /** One delivery as the log has it now, with the position of the last record it reflects; undefined when unknown (or pruned). */
  current(subscriptionId: string, deliveryId: string): Promise<DeliveryAsOf | undefined>;
  /**
   * Whether a fan-out recorded each delivery already, for an event handed over again (Kafka after a
   * crash or a rebalance): one read for all of an event's deliveries. Absent: the deliveries a
   * restart read are remembered instead (`resume`).
   */
  recorded?(keys: readonly DeliveryKey[]): Promise<readonly boolean[]>;
  /** Where a subscription's waiting deliveries are read from before its stream's later records; absent: the stream from its first record. */
  readonly seeds?: WaitingReader;
  /** A look-up of the subscription's deliveries by id, for a replay paging through its events. */
  lookup(subscriptionId: string): Promise<DeliveryLookup>;
  /** The subscription's waiting deliveries, at most `size` at a time, however many wait (a deactivation cancels them). */
  waitingPages(subscriptionId: string, size: number): AsyncIterable<readonly Delivery[]>;
}

/**
 * Those of `deliveryIds` a subscription has, each as the log has it when asked (where an index
 * answers: absent once pruned past the retention): what a replay asks of each page of events.
 */
export type DeliveryLookup = (deliveryIds: readonly string[]) => Promise<ReadonlyMap<string, Delivery>>;

/** The deliveries as the log has them: folded from every delivery record, or a subscription's whole stream. */
export const recordsFromLog = (log: EventLog): DeliveryRecords => ({
  async *waiting() {
    for (const restored of (await readDeliveryHistory(log)).deliveries) if (restored.delivery.status === 'waiting') yield restored;
  },
  async current(subscriptionId, deliveryId) {
    const events = await log.readStream(deliveryStream(subscriptionId));
    const delivery = foldDeliveries(events).get(deliveryId);
    return delivery === undefined ? undefined : { delivery, position: (events.at(-1) as RecordedEvent).position };
  },
  // With no index, the stream is read once, whole, and asked as it was then.
  async lookup(subscriptionId) {
    const all = foldDeliveries(await log.readStream(deliveryStream(subscriptionId)));
    return async (deliveryIds) => new Map(deliveryIds.flatMap((id) => (all.has(id) ? [[id, all.get(id) as Delivery] as const] : [])));
  },
  async *waitingPages(subscriptionId, size) {
    const waiting = [...foldDeliveries(await log.readStream(deliveryStream(subscriptionId))).values()].filter((delivery) => delivery.status === 'waiting');
    for (let i = 0; i < waiting.length; i += size) yield waiting.slice(i, i + size);
  },
});

export interface Dispatcher {
  /**
   * Records one delivery per matching subscription (active, type subscribed, created before the event)
   * and queues its first attempt. Resolves once the deliveries are durable. Idempotent: a replayed
   * event finds its deliveries already known. `fannedOutThrough` is stamped on the records so an
   * embedded restart can derive its checkpoint from the log.
   */
  fanOut(record: RecordedEvent, fannedOutThrough?: number): Promise<void>;
  /** Takes over deliveries read back from the log; those of events after `fannedOutThrough` are remembered so a replay skips them. */
  resume(restored: Iterable<RestoredDelivery> | AsyncIterable<RestoredDelivery>, fannedOutThrough: number): Promise<void>;
  /** Cancels the waiting deliveries of events before the deactivation at `position`. */
  subscriptionDeactivated(subscriptionId: string, position: number): Promise<void>;
  /** Forgets the subscription's deliveries and deletes their history; nothing is sent to it once this is called. */
  subscriptionDeleted(subscriptionId: string): Promise<void>;
  /**
   * Takes up round `round` of a delivery another process recorded in the log, waiting for an attempt
   * (a manual retry, or a replayed delivery whose driver stopped before putting it in the schedule);
   * idempotent by delivery id and round.
   */
  takeUp(subscriptionId: string, deliveryId: string, round: number): Promise<void>;
  /**
   * Records the delivery of `event` again to a subscription, under the replay's own delivery id, and
   * queues its first attempt behind what is due already. Resolves once it is durable. The caller
   * knows what the replay scheduled before (a restart): it is not asked twice.
   */
  replay(event: RecordedEvent, subscription: SubscriptionRow, replayId: string): Promise<void>;
  /** How many replayed deliveries may enter the schedule now: none while a live delivery waits for its first attempt here, or live work fills half the slots. */
  replayRoom(): number;
  /** The ids of the replay's deliveries not attempted yet, as the subscription's stream has them. */
  replayBacklog(subscriptionId: string, replayId: string): Promise<readonly string[]>;
  /** A look-up of the subscription's deliveries by id, from where this dispatcher reads those it does not hold (DeliveryRecords). */
  lookup(subscriptionId: string): Promise<DeliveryLookup>;
  /** The attempts waiting in the schedule and the earliest due time among them. */
  backlog(): Promise<DeliveryBacklog>;
  /** How late fan-outs and attempts started, since this dispatcher started (punctuality.ts). */
  punctuality(): Promise<PunctualityFigures>;
  start(): void;
  stop(): Promise<void>;
}

interface Pending {
  delivery: Delivery;
  readonly workspaceId: string;
  body: Buffer | null;
  inFlight: boolean;
  /** Cancels the attempt in flight (what is not written yet is never sent). */
  cancel?: () => void;
}

/** The kind of attempt `attempt` of the delivery is, for the punctuality figures. */
const attemptKind = (delivery: Delivery, attempt: number): AttemptKind => {
  if (attempt > 1 || delivery.round > 1) return 'retry';
  return delivery.replayId === null ? 'first' : 'replay';
};

/** The schedule's entry for the delivery's next attempt, due at `dueAt`; a retry is taken before first attempts. */
const dueAttempt = (delivery: Delivery, dueAt: number): DueAttempt => ({
  deliveryId: delivery.id,
  subscriptionId: delivery.subscriptionId,
  dueAt,
  round: delivery.round,
  ...(attemptKind(delivery, delivery.attempt + 1) === 'retry' ? { retry: true } : {}),
});

const decided = (command: DeliveryCommand, state: Delivery | null): readonly Decided[] => {
  const result = deliveryAggregate.decide(command, state);
  if (result._tag === 'Left') throw new Error(`delivery ${state?.id ?? '?'}: ${result.left.message}`);
  return result.right;
};

const fold = (state: Delivery | null, events: readonly Decided[]): Delivery => {
  const next = events.reduce(deliveryAggregate.evolve, state);
  if (next === null) throw new Error('a delivery command produced no delivery');
  return next;
};

/** Another dispatcher's puts do not wake this one: with a shared schedule it also looks this often (and so notices a lost schedule). */
const SHARED_WAKE_MS = 1000;
/** Deliveries put in a shared schedule kept to be claimed back from memory: at ~1 KB of body each, ~10 MB. */
const OWN_PUTS_KEPT = 10_000;
/**
 * Bodies read back from the log kept by event position, for the other subscriptions of the same event
 * (a restart's or the parking lot's deliveries go out each subscription in event order, at about the
 * same pace): at ~1 KB each, ~10 MB. Each read is a log read and a serialization, 22 µs.
 */
const BODIES_KEPT = 10_000;

export const createDispatcher = (deps: DispatcherDeps): Dispatcher => {
  const { log, subscriptions, sender, clock } = deps;
  const shared = 'shared' in deps.schedule ? deps.schedule.shared : null;
  const schedule: RetrySchedule = 'shared' in deps.schedule ? deps.schedule.shared : deps.schedule.own;
  const records = deps.records ?? recordsFromLog(log);
  const recorder = createRecorder(log);
  const waiting = createWaitingDeliveries(log, records.seeds, undefined, deps.waitingKept);
  const punctuality = createPunctuality();
  const pending = new Map<string, Pending>();
  const bySubscription = new Map<string, Set<string>>();
  /** Live deliveries this dispatcher scheduled whose first attempt has not started: replays wait for them. */
  const liveUnattempted = new Set<string>();
  /** Events whose fan-out is under way: the backlog's oldest due time counts them from their commit. */
  const fanningOut = new Set<RecordedEvent>();
  /** Deliveries already in the log for events a restart replays, by event and subscription (whatever shape their ids have). */
  const known = new Set<string>();
  const knownKey = (eventId: string, subscriptionId: string): string => `${eventId} ${subscriptionId}`;
  /** Reads under way and bodies read, by event position: one read per position for all its deliveries. */
  const bodiesRead = createBoundedCache<Promise<Buffer | null>>(BODIES_KEPT);
  const reportLock = createKeyedLock();
  const settling = new Set<Promise<void>>();
  /** The background deletions of histories a restart found (`resume`), one run after the other; a stop does not wait for them. */
  let historyDeletions = Promise.resolve();
  const ownPuts = createOwnPuts<Pending>(OWN_PUTS_KEPT);
  const lookValidMs = deps.lookValidMs ?? LOOK_VALID_MS;
  const loggedNow = sharedPerTurn(log, lookValidMs);
  const turns = watchEventLoopTurns();
  const parking = shared ? undefined : deps.parking;
  /** Subscriptions whose parked attempts are being taken back (one take at a time each). */
  const refilling = new Set<string>();
  /** Set by stop: nothing is taken back from the lot it closes. */
  let stopping = false;
  const held = (subscriptionId: string): number => bySubscription.get(subscriptionId)?.size ?? 0;

  const track = (p: Pending): void => {
    pending.set(p.delivery.id, p);
    const ids = bySubscription.get(p.delivery.subscriptionId) ?? new Set<string>();
    ids.add(p.delivery.id);
    bySubscription.set(p.delivery.subscriptionId, ids);
  };

  const forget = (p: Pending): void => {
    pending.delete(p.delivery.id);
    liveUnattempted.delete(p.delivery.id);
    const ids = bySubscription.get(p.delivery.subscriptionId);
    ids?.delete(p.delivery.id);
    if (ids?.size === 0) bySubscription.delete(p.delivery.subscriptionId);
    refill(p.delivery.subscriptionId);
  };

  /**
   * Parks what need not be held (`parking`): a retry due later than the horizon; a first attempt of a
   * subscription with first attempts parked already (they go out in order); and past `maxHeld` held
   * in all, an attempt of a subscription holding more than its share. Returns the rest. A parked
   * delivery is forgotten here; the log has it.
   */
  const parked = (due: readonly { p: Pending; at: number }[]): readonly { p: Pending; at: number }[] => {
    if (parking === undefined) return due;
    const horizon = clock() + parking.horizonMs * 1000;
    const parkingFirsts = new Set<string>();
    const toPark: ParkedAttempt[] = [];
    const forgotten: Pending[] = [];
    const kept = due.filter(({ p, at }) => {
      const { subscriptionId } = p.delivery;
      const retry = attemptKind(p.delivery, p.delivery.attempt + 1) === 'retry';
      const pressed = pending.size > parking.maxHeld && held(subscriptionId) > parking.heldPerSubscription;
      const parks = retry ? at > horizon || pressed : pressed || parkingFirsts.has(subscriptionId) || parking.lot.firsts(subscriptionId) > 0;
      if (!parks) return true;
      if (!retry) parkingFirsts.add(subscriptionId);
      toPark.push({ delivery: p.delivery, dueAt: at, retry });
      forgotten.push(p);
      return false;
    });
    if (toPark.length === 0) return kept;
    parking.lot.park(toPark);
    forgotten.forEach(forget);
    return kept;
  };

  /**
   * Hands deliveries' next attempts to the schedule: `put` by their owner (all in one call), `offer`
   * by a dispatcher announcing deliveries it does not own. A shared schedule may give them to another
   * dispatcher, so this one lets go.
   */
  const enqueue = async (due: readonly { p: Pending; at: number }[], how: 'put' | 'offer' = 'put'): Promise<void> => {
    if (shared) {
      for (const { p } of due) {
        forget(p);
        // Before the put: the claim of it may come at once.
        if (how === 'put') ownPuts.keep(p.delivery.id, p);
      }
    }
    const entries = parked(due).map(({ p, at }) => dueAttempt(p.delivery, at));
    // Shared, a put takes its own attempts (one script for what was three round trips). Embedded, a
    // take is a call in memory: the puts of a turn are taken together once it ends, which starting each
    // fan-out's attempts at its put made slower (the embedded burst's p99 higher in five pairs of six).
    if (how === 'put' && shared) return pump.put(entries);
    await (how === 'put' ? schedule.put(...entries) : schedule.offer(...entries));
    pump.kick();
  };

  /**
   * Subscriptions deleted although the directory may still have them: a directory tailing a log
   * shared with other processes may miss the deletion marker, which the DELETE removes with the rest
   * of the stream a moment after appending it, or apply it after the DELETE told this dispatcher
   * (`subscriptionDeleted`). Ids are never reused: gone is for good.
   */
  const gone = new Set<string>();
  /** The subscription as the directory has it, unless its stream was found gone. */
  const existing = (workspaceId: string, subscriptionId: string): SubscriptionRow | undefined =>
    gone.has(subscriptionId) ? undefined : subscriptions.get(workspaceId, subscriptionId);

  /** Appends to the subscription's stream, never re-creating the stream of a deleted subscription. */
  const record = async (workspaceId: string, subscriptionId: string, events: readonly Decided[], urgent = false): Promise<void> => {
    if (events.length === 0 || existing(workspaceId, subscriptionId) === undefined) return;
    const stream = deliveryStream(subscriptionId);
    await recorder.record(stream, workspaceId, events, urgent);
    // Deleted while the append was under way: what was just written must go with the rest.
    if (existing(workspaceId, subscriptionId) === undefined) await log.deleteStream(stream);
  };

  const apply = async (p: Pending, command: DeliveryCommand, urgent = false): Promise<void> => {
    const events = decided(command, p.delivery);
    p.delivery = fold(p.delivery, events);
    await record(p.workspaceId, p.delivery.subscriptionId, events, urgent);
  };

  /**
   * Recorded before the entry leaves the schedule: killed in between, the log says cancelled and the
   * entry left behind finds nothing waiting when taken. (The other way round, the log said waiting
   * with no entry to attempt it until a restart.) `urgent`: written at the next turn, with the others
   * cancelled in this one, not at the recorder's next interval.
   */
  const cancel = async (p: Pending, reason: string, urgent = false): Promise<void> => {
    forget(p);
    await apply(p, { kind: 'cancel', reason, at: clock() }, urgent);
    await schedule.remove(p.delivery.id, p.delivery.round);
  };

  /** Subscription reports run one at a time per subscription, so the failure count sees them in order. */
  const reportSerially = (p: Pending, kind: DeliveryReport['kind']): Promise<void> => {
    const { subscriptionId } = p.delivery;
    return reportLock(subscriptionId, async () => {
      const row = subscriptions.get(p.workspaceId, subscriptionId);
      if (row === undefined || (kind === 'record_delivery_succeeded' && row.consecutiveFailures === 0)) return;
      await deps.report(p.workspaceId, subscriptionId, { kind, deliveryId: p.delivery.id, round: p.delivery.round });
    });
  };

  /**
   * After an attempt: the subscription is told first, then the outcome recorded. A crash between the
   * two repeats the attempt, and the report, keyed by delivery id, then counts once.
   */
  const conclude = async (p: Pending, attempt: number, outcome: AttemptOutcome): Promise<void> => {
    const events = decided({ kind: 'record_attempt', attempt, outcome, at: clock(), retryDelaysMs: deps.retryDelaysMs }, p.delivery);
    const delivery = fold(p.delivery, events);
    if (delivery.status === 'delivered') {
      forget(p);
      await reportSerially(p, 'record_delivery_succeeded');
    } else if (delivery.status === 'failed') {
      forget(p);
      await reportSerially(p, 'record_delivery_failed');
    }
    p.delivery = delivery;
    await record(p.workspaceId, delivery.subscriptionId, events);
    // The claim is settled once the outcome is durable: a crash before then offers the attempt again.
    // A manual retry may be offered as soon as the outcome is in the log: removing by round keeps it.
    if (delivery.status !== 'waiting' || delivery.nextAttemptAt === null) return schedule.remove(delivery.id, delivery.round);
    const row = subscriptions.get(p.workspaceId, delivery.subscriptionId);
    if (row === undefined) {
      forget(p);
      await schedule.remove(delivery.id, delivery.round);
    } else if (!row.isActive) await cancel(p, 'subscription_inactive');
    else await enqueue([{ p, at: delivery.nextAttemptAt }]);
  };

  /** Work a stop waits for, its failure logged as `webhook <what>:`. */
  const tracked = (work: Promise<void>, what: string): void => {
    const logged = work.catch((error: unknown) => console.error(`webhook ${what}:`, error));
    settling.add(logged);
    void logged.finally(() => settling.delete(logged));
  };
  const settle = (work: Promise<void>, deliveryId: string): void => tracked(work, `delivery ${deliveryId}`);

  const bodyOf = (p: Pending): Promise<Buffer | null> => {
    if (p.body !== null) return Promise.resolve(p.body);
    const position = String(p.delivery.eventPosition);
    let body = bodiesRead.get(position);
    if (body === undefined) {
      const reading = bodyAtPosition(log, p.delivery.eventPosition);
      bodiesRead.set(position, reading);
      // Only a body is kept: an event gone, or a read that failed, is asked again next time.
      const drop = (): void => void (bodiesRead.get(position) === reading && bodiesRead.delete(position));
      void reading.then((read) => read === null && drop(), drop);
      body = reading;
    }
    return body;
  };

  /** One delivery as the log has it now, with its workspace; undefined when unknown or its subscription is gone. */
  const readOne = async (subscriptionId: string, deliveryId: string): Promise<{ delivery: Delivery; workspaceId: string } | undefined> => {
    const found = await records.current(subscriptionId, deliveryId);
    if (found === undefined) return undefined;
    // The subscription was created before its first delivery: the directory must know it before judging it gone.
    await subscriptions.waitFor(found.position);
    const workspaceId = subscriptions.workspaceOf(subscriptionId);
    return workspaceId === undefined ? undefined : { delivery: found.delivery, workspaceId };
  };

  /**
   * The subscription's waiting deliveries, read incrementally (the hot path of a shared schedule);
   * null when it has too many to keep.
   */
  const readWaiting = async (subscriptionId: string): Promise<WaitingView | null> => {
    const view = await waiting.read(subscriptionId);
    if (view !== null && view.position > 0) await subscriptions.waitFor(view.position);
    return view;
  };

  /** Holds a waiting delivery read from the log, unless this dispatcher holds it already. */
  const hold = (delivery: Delivery, workspaceId: string): Pending => {
    const held = pending.get(delivery.id);
    if (held !== undefined) return held;
    const p: Pending = { delivery, workspaceId, body: null, inFlight: false };
    track(p);
    return p;
  };

  /**
   * Deliveries of a subscription with too many waiting to keep a view of, read from the history the
   * claims of a turn at a time: one look-up (the index, and the stream's records after what it applied) for all.
   */
  const lookUps = new Map<string, { readonly ids: string[]; readonly found: Promise<ReadonlyMap<string, Delivery>> }>();
  const lookUp = async (subscriptionId: string, deliveryId: string): Promise<Delivery | undefined> => {
    let batch = lookUps.get(subscriptionId);
    if (batch === undefined) {
      const ids: string[] = [];
      const found = (async () => {
        await nextTurn();
        lookUps.delete(subscriptionId);
        return (await records.lookup(subscriptionId))(ids);
      })();
      batch = { ids, found };
      lookUps.set(subscriptionId, batch);
    }
    batch.ids.push(deliveryId);
    return (await batch.found).get(deliveryId);
  };

  /** The claimed delivery as the log has it: from the subscription's view, else looked up. */
  const claimed = async ({ subscriptionId, deliveryId }: DueAttempt): Promise<{ delivery: Delivery; workspaceId: string } | undefined> => {
    const view = await readWaiting(subscriptionId);
    if (view === null) {
      // Too many waiting to keep: looked up with the turn's other claims, once the directory knows the subscription.
      const workspaceId = subscriptions.workspaceOf(subscriptionId);
      const delivery = workspaceId === undefined ? undefined : await lookUp(subscriptionId, deliveryId);
      if (delivery !== undefined && workspaceId !== undefined) return { delivery, workspaceId };
    }
    const kept = view?.deliveries.get(deliveryId);
    if (kept !== undefined && view !== null && view.workspaceId !== null) return { delivery: kept, workspaceId: view.workspaceId };
    // Not among the waiting ones (a manual retry of a delivery settled long ago): read from the history.
    return readOne(subscriptionId, deliveryId);
  };

  /** A claimed delivery this dispatcher does not hold (another one scheduled it, or this one restarted); undefined when no longer waiting. */
  const takeOver = async (entry: DueAttempt): Promise<Pending | undefined> => {
    const found = await claimed(entry);
    if (found?.delivery.status !== 'waiting') return pending.get(entry.deliveryId);
    return hold(found.delivery, found.workspaceId);
  };

  /**
   * A claim of this dispatcher's own put that no other dispatcher claimed since: the delivery, its
   * body included, is as this one recorded it, so it is attempted from memory.
   */
  const claimOwn = (entry: DueAttempt): Pending | undefined => {
    const p = ownPuts.take(entry.deliveryId);
    if (entry.ownPut !== true || p === undefined || p.delivery.round !== entry.round) return undefined;
    track(p);
    return p;
  };

  /**
   * Takes parked attempts back: each delivery held again as it was parked (nothing else moves a
   * waiting delivery meanwhile, parking.ts) and put in the schedule; those of a subscription gone are dropped.
   */
  const unpark = async (attempts: readonly ParkedAttempt[]): Promise<void> => {
    const taken: Pending[] = [];
    for (const { delivery } of attempts) {
      const workspaceId = subscriptions.workspaceOf(delivery.subscriptionId);
      if (workspaceId === undefined || gone.has(delivery.subscriptionId)) continue;
      taken.push(hold(delivery, workspaceId));
      if (attemptKind(delivery, delivery.attempt + 1) === 'first') liveUnattempted.add(delivery.id);
    }
    if (taken.length === 0) return;
    await schedule.put(...taken.map((p) => dueAttempt(p.delivery, p.delivery.nextAttemptAt as number)));
    pump.kick();
  };

  /**
   * How many parked attempts the subscription may have back now: with under half of `maxHeld` held
   * in all, up to three quarters of it (a batch at most); and once the subscription holds under half
   * its share, up to that share. The gaps between the marks keep a take from following every settle.
   */
  const roomFor = (subscriptionId: string, { maxHeld, heldPerSubscription }: Parking): number => {
    const overall = pending.size < maxHeld / 2 ? Math.min(PARKING_BATCH, Math.floor((maxHeld * 3) / 4) - pending.size) : 0;
    const holds = held(subscriptionId);
    return Math.max(overall, holds < heldPerSubscription / 2 ? heldPerSubscription - holds : 0);
  };

  /**
   * Takes back the subscription's parked retries falling due within the horizon, then its first
   * attempts, earliest first, a batch at a time while it has room for them (one take at a time each).
   */
  function refill(subscriptionId: string): void {
    if (parking === undefined || stopping || refilling.has(subscriptionId) || !parking.lot.has(subscriptionId)) return;
    const room = roomFor(subscriptionId, parking);
    if (room === 0) return;
    const { lot, horizonMs } = parking;
    refilling.add(subscriptionId);
    const work = (async () => {
      const taken = lot.takeRetries(subscriptionId, clock() + horizonMs * 1000, room);
      if (taken.length < room) taken.push(...lot.takeFirsts(subscriptionId, room - taken.length));
      await unpark(taken);
      refilling.delete(subscriptionId);
      // A full batch: more may be waiting.
      if (taken.length === room) refill(subscriptionId);
    })().finally(() => refilling.delete(subscriptionId));
    // A stop waits for it before it closes the lot.
    tracked(work, `${subscriptionId}: taking back its parked attempts failed`);
  }
  let sweeper: NodeJS.Timeout | null = null;

  /** One attempt; resolves when its slot is free (the bookkeeping after it continues in `settling`). */
  const attemptOnce = async (entry: DueAttempt): Promise<void> => {
    liveUnattempted.delete(entry.deliveryId);
    const p = pending.get(entry.deliveryId) ?? claimOwn(entry) ?? (await takeOver(entry));
    // Nothing left to attempt, or the attempt under way settles it: the claim is settled here.
    if (p === undefined || p.inFlight) return schedule.remove(entry.deliveryId, entry.round);
    // Its lateness is counted once, at its first send.
    let counted = false;
    const started = (attempt: number): void => {
      if (!counted) punctuality.started(attemptKind(p.delivery, attempt), clock() - entry.dueAt);
      counted = true;
    };
    // Withheld: what it knew of the log grew too old before the request was written. It looks again
    // once the timers have run (the directory's tail with them).
    while ((await lookThenSend(p, started)) === WITHHELD) await sleep(0);
  };

  /**
   * Whether what the attempt knows of the log is too old to write it on: the later of its look and
   * the last turn of the event loop (the directory, kept by a tail polling the log, is current as of
   * that turn) must be within `lookValidMs`. A DELETE that waits for this dispatcher and hears nothing
   * answers no sooner than its bound, twice that, after its marker is in the log: an attempt written
   * within `lookValidMs` of a look that did not see the marker goes out before that answer. Past it
   * (the process stalled between the look and the write), the attempt looks again first.
   */
  const tooOld = (lookedAt: number): boolean => performance.now() - Math.max(lookedAt, turns.lastTurn()) > lookValidMs;

  /** Checks the subscription, looks at the log and sends (`started` as it does); WITHHELD when nothing was written because the look grew too old. */
  const lookThenSend = async (p: Pending, started: (attempt: number) => void): Promise<typeof WITHHELD | void> => {
    const row = existing(p.workspaceId, p.delivery.subscriptionId);
    if (row === undefined) return settle(dispatcher.subscriptionDeleted(p.delivery.subscriptionId), p.delivery.id);
    if (!row.isActive) return settle(cancel(p, 'subscription_inactive'), p.delivery.id);
    // The directory may have missed the deletion (see `gone`), or not have applied its marker yet (a
    // dispatcher in another process or thread): the log decides before anything is sent (one look
    // per subscription row and turn, shared by the attempts the turn starts).
    const unreachable = deps.reachable?.();
    if (unreachable) await unreachable;
    const look = await loggedNow(row);
    const { logged } = look;
    if (logged === 'gone') {
      gone.add(row.id);
      return settle(dispatcher.subscriptionDeleted(row.id), p.delivery.id);
    }
    // A rotation (or any change) answered already but not applied here yet: the directory catches up
    // first, so the attempt is signed with the new secrets, not the old alone.
    if (logged.newerThrough !== null) await subscriptions.waitFor(logged.newerThrough);
    p.inFlight = true;
    const body = await bodyOf(p);
    p.inFlight = body !== null;
    if (body === null) return settle(cancel(p, 'event_deleted'), p.delivery.id);
    p.body = body;
    // A DELETE answered while this attempt was being prepared: nothing goes out after it.
    if (existing(p.workspaceId, row.id) === undefined) {
      p.inFlight = false;
      return settle(dispatcher.subscriptionDeleted(row.id), p.delivery.id);
    }
    if (tooOld(look.at)) {
      p.inFlight = false;
      return WITHHELD;
    }
    const attempt = p.delivery.attempt + 1;
    let withheld = false;
    // Asked just before the request is written to its connection (which may have taken a while to open).
    const wanted = (): boolean => {
      withheld = tooOld(look.at);
      return !withheld && !gone.has(row.id) && existing(p.workspaceId, row.id) !== undefined;
    };
    // The secrets as they are when it is sent, not when it was scheduled.
    const { secrets } = existing(p.workspaceId, row.id) ?? row;
    const request = { url: row.url, body, eventType: p.delivery.eventType, deliveryId: p.delivery.id, attempt, secrets, wanted };
    started(attempt);
    const outcome = await sender.send(request, (cancel) => {
      p.cancel = cancel;
    });
    p.inFlight = false;
    delete p.cancel;
    if (withheld) return WITHHELD;
    settle(conclude(p, attempt, outcome), p.delivery.id);
  };

  const pump = createPump({
    schedule,
    clock,
    maxInFlight: deps.maxInFlight,
    maxInFlightPerSubscription: deps.maxInFlightPerSubscription,
    maxInFlightPerWorkspace: deps.maxInFlightPerWorkspace,
    workspaceOf: subscriptions.workspaceOf,
    run: attemptOnce,
    ...(shared ? { wakeEveryMs: SHARED_WAKE_MS } : {}),
  });

  /**
   * The shared schedule lost its entries (Redis restarted without persistence): offers every waiting
   * delivery again. One that was due may be under way at a dispatcher whose claim went
   * with the rest: it is offered at the end of such a claim's lease, by when its owner has put or
   * removed it, so the attempt is not sent twice at once.
   */
  const reseed = async (store: SharedRetrySchedule): Promise<void> => {
    console.warn('retry schedule lost (Redis restarted without persistence?): re-seeding it with the waiting deliveries');
    const now = clock();
    const leaseEnd = now + store.leaseMs * 1000;
    let seeded = 0;
    // A batch of offers at a time (one call), as they are read: a backlog of millions is never held at once.
    let batch: DueAttempt[] = [];
    const offer = async (): Promise<void> => {
      await store.offer(...batch.map((entry) => (entry.dueAt <= now ? { ...entry, dueAt: leaseEnd } : entry)));
      seeded += batch.length;
      batch = [];
      pump.kick();
    };
    for await (const { delivery, workspaceId } of records.waiting()) {
      if (delivery.nextAttemptAt === null || subscriptions.get(workspaceId, delivery.subscriptionId) === undefined) continue;
      batch.push(dueAttempt(delivery, delivery.nextAttemptAt));
      if (batch.length === PARKING_BATCH) await offer();
    }
    await offer();
    console.warn(`retry schedule re-seeded with ${seeded} waiting deliveries`);
  };
  if (shared !== null) shared.onLost(() => reseed(shared));

  /**
   * Records new deliveries of one event and queues their first attempts, due now, in one call to the
   * schedule. `durable`: resolves only once the records are in the log, even when the attempts may go
   * out first.
   */
  const scheduleNew = async (event: RecordedEvent, body: Buffer, commands: readonly Extract<DeliveryCommand, { kind: 'schedule' }>[], durable = false): Promise<void> => {
    if (commands.length === 0) return;
    const planned = commands.map((command) => {
      const events = decided(command, null);
      const p: Pending = { delivery: fold(null, events), workspaceId: event.workspaceId, body, inFlight: false };
      track(p);
      if (command.replayId === undefined) liveUnattempted.add(command.deliveryId);
      return { p, at: command.at, events, subscriptionId: command.subscriptionId };
    });
    const recorded = () => Promise.all(planned.map(({ subscriptionId, events }) => record(event.workspaceId, subscriptionId, events, shared !== null)));
    if (shared || durable) {
      // Whoever claims a first attempt reads the delivery from the log: it must be there first.
      await recorded();
      await enqueue(planned);
    } else {
      // A first attempt may go out before its record is durable: a crash then repeats it, never loses it.
      await Promise.all([enqueue(planned), recorded()]);
    }
  };

  /** Offers the next attempt of a delivery read from the log, if it is waiting for one. */
  const offerWaiting = async ({ delivery, workspaceId }: { delivery: Delivery; workspaceId: string }): Promise<void> => {
    if (delivery.status === 'waiting' && delivery.nextAttemptAt !== null) await enqueue([{ p: hold(delivery, workspaceId), at: delivery.nextAttemptAt }], 'offer');
  };

  /**
   * Which of the deliveries a fan-out recorded already (the event is handed over again). With a
   * shared schedule their attempts are offered: the dispatcher that recorded one may have died before
   * its put (scheduleNew records first), and nothing else would ever bring the delivery to the
   * schedule. An entry that is there, scheduled or claimed, stays as it is.
   */
  const recordedBefore = async (eventId: string, keys: readonly DeliveryKey[]): Promise<readonly boolean[]> => {
    if (records.recorded === undefined || keys.length === 0) return keys.map(() => false);
    // Each under its id and the one an older release gave it (one read for both).
    const asked = keys.flatMap((key) => [key, { subscriptionId: key.subscriptionId, deliveryId: legacyDeliveryIdOf(eventId, key.subscriptionId) }]);
    const found = await records.recorded(asked);
    const recordedAs = keys.map((key, i) => (found[2 * i] === true ? key : found[2 * i + 1] === true ? asked[2 * i + 1] : undefined));
    await Promise.all(
      recordedAs.map(async (key) => {
        const delivery = shared === null || key === undefined ? undefined : await readOne(key.subscriptionId, key.deliveryId);
        if (delivery !== undefined) await offerWaiting(delivery);
      }),
    );
    return recordedAs.map((key) => key !== undefined);
  };

  const dispatcher: Dispatcher = {
    async fanOut(event, fannedOutThrough = 0) {
      if (event.offset === null || !isPublicEventType(event.type)) return;
      const targets = subscriptions
        .matching(event.workspaceId, event.type)
        .filter((s) => s.isActive && !gone.has(s.id) && s.createdPosition < event.position && (s.events.length === 0 || s.events.includes(event.type)));
      if (targets.length === 0) return;
      const body = envelopeBytes(event);
      const at = clock();
      const unknown = targets
        .map((subscription) => ({ subscriptionId: subscription.id, deliveryId: deliveryIdOf(event.id, subscription.id) }))
        .filter(({ subscriptionId, deliveryId }) => !pending.has(deliveryId) && !known.delete(knownKey(event.id, subscriptionId)));
      fanningOut.add(event);
      try {
        const recorded = await recordedBefore(event.id, unknown);
        const fresh = unknown.filter((_, i) => recorded[i] !== true);
        await scheduleNew(
          event,
          body,
          fresh.map(({ subscriptionId, deliveryId }) => ({ kind: 'schedule', deliveryId, subscriptionId, eventId: event.id, eventType: event.type, eventPosition: event.position, fannedOutThrough, at })),
        );
        // An event fanned out again after a restart, its deliveries already recorded, is not counted twice.
        if (fresh.length > 0) punctuality.fannedOut(at - event.offset);
      } finally {
        fanningOut.delete(event);
      }
    },

    async replay(event, subscription, replayId) {
      const deliveryId = replayDeliveryIdOf(event.id, subscription.id, replayId);
      if (pending.has(deliveryId)) return;
      const command = { kind: 'schedule', deliveryId, subscriptionId: subscription.id, eventId: event.id, eventType: event.type, eventPosition: event.position, fannedOutThrough: 0, replayId, at: clock() } as const;
      // The body bytes of the live delivery: the same function of the same record.
      await scheduleNew(event, envelopeBytes(event), [command], true);
    },

    // Parked first attempts count as unattempted live ones (a replay's own among them: it waits for them too).
    replayRoom: () => (liveUnattempted.size > 0 || (parking?.lot.firsts() ?? 0) > 0 ? 0 : Math.max(0, Math.floor(deps.maxInFlight / 2) - pump.load())),

    async replayBacklog(subscriptionId, replayId) {
      // Without an index the view is never let go, however many wait.
      const firsts = records.seeds === undefined ? ((await waiting.read(subscriptionId)) as WaitingView).deliveries.values() : await replayFirstsNow(records.seeds, log, subscriptionId, replayId);
      return [...firsts].filter((d) => d.replayId === replayId && d.round === 1 && d.attempt === 0).map((d) => d.id);
    },

    lookup: (subscriptionId) => records.lookup(subscriptionId),

    async resume(restored, fannedOutThrough) {
      const gone = new Set<string>();
      // Offered a batch at a time: what is parked goes to the lot in one transaction a batch.
      let batch: { p: Pending; at: number }[] = [];
      for await (const { delivery, workspaceId } of restored) {
        if (subscriptions.get(workspaceId, delivery.subscriptionId) === undefined) {
          gone.add(delivery.subscriptionId);
          continue;
        }
        // Only live deliveries come back through a replayed fan-out.
        if (delivery.eventPosition > fannedOutThrough && delivery.replayId === null) known.add(knownKey(delivery.eventId, delivery.subscriptionId));
        if (delivery.status !== 'waiting' || delivery.nextAttemptAt === null) continue;
        // Through the schedule, never straight to an attempt: a shared one takes the offers of every
        // starting dispatcher as one entry, and hands each attempt to one of them. Offered, not put:
        // another dispatcher may be attempting it under a claim that a put would drop.
        const p: Pending = { delivery, workspaceId, body: null, inFlight: false };
        track(p);
        batch.push({ p, at: delivery.nextAttemptAt });
        if (batch.length === PARKING_BATCH) {
          await enqueue(batch, 'offer');
          batch = [];
        }
      }
      await enqueue(batch, 'offer');
      // History left behind by a deletion that happened while the dispatcher was not looking, and by
      // deletions a stopped process left part way: in the background, as the log's tail waits for the
      // take-over's end, and such a history may take half a minute.
      historyDeletions = historyDeletions.then(() => deleteHistoriesMeanwhile(log, gone));
    },

    async subscriptionDeactivated(subscriptionId, position) {
      // A batch at a time, each batch's together: a cancellation waits for its record to be durable
      // (the recorder's next write), so one at a time they went at one a write.
      const cancelHeld = async (): Promise<void> => {
        const ids = [...(bySubscription.get(subscriptionId) ?? [])];
        for (let i = 0; i < ids.length; i += PARKING_BATCH) {
          const due = ids.slice(i, i + PARKING_BATCH).flatMap((id) => {
            const p = pending.get(id);
            return p !== undefined && !p.inFlight && p.delivery.eventPosition < position ? [p] : [];
          });
          await Promise.all(due.map((p) => cancel(p, 'subscription_inactive', true)));
        }
      };
      // A shared schedule's waiting deliveries are held by no dispatcher until claimed: each one reads
      // them, a page at a time, and cancels what it read before it reads on (memory follows the page).
      if (shared) {
        // The directory must know the subscription before a record is written: it was created before its deactivation.
        await subscriptions.waitFor(position);
        const workspaceId = subscriptions.workspaceOf(subscriptionId);
        if (workspaceId !== undefined) {
          for await (const page of records.waitingPages(subscriptionId, PARKING_BATCH)) {
            for (const delivery of page) hold(delivery, workspaceId);
            await cancelHeld();
          }
        }
      }
      await cancelHeld();
      // The parked ones a batch at a time, so that holding them never costs more than a batch (an
      // attempt taken meanwhile finds the subscription inactive and cancels it the same way).
      for (let batch = parking?.lot.takeAny(subscriptionId, PARKING_BATCH) ?? []; batch.length > 0; batch = parking?.lot.takeAny(subscriptionId, PARKING_BATCH) ?? []) {
        await unpark(batch);
        await cancelHeld();
      }
    },

    async subscriptionDeleted(subscriptionId) {
      // First, at once: the DELETE answers once this has begun, and nothing may go out after it, not
      // even an attempt being prepared while the directory has yet to apply the marker.
      gone.add(subscriptionId);
      for (const id of bySubscription.get(subscriptionId) ?? []) pending.get(id)?.cancel?.();
      for (const id of [...(bySubscription.get(subscriptionId) ?? [])]) {
        const p = pending.get(id);
        if (p === undefined) continue;
        forget(p);
        await schedule.remove(id);
      }
      // A batch at a time, a turn between: the sends of other subscriptions go on meanwhile.
      if (parking !== undefined) while (parking.lot.drop(subscriptionId, PARKING_BATCH) === PARKING_BATCH) await nextTurn();
      waiting.forget(subscriptionId);
      await deleteSubscriptionHistory(log, subscriptionId);
    },

    async takeUp(subscriptionId, deliveryId, round) {
      if ((pending.get(deliveryId)?.delivery.round ?? 0) >= round) return;
      // From the history: the waiting view kept no settled delivery to fold the request onto.
      const found = await readOne(subscriptionId, deliveryId);
      // Already attempted, settled or superseded by a later round: nothing to take up.
      if (found === undefined || found.delivery.round !== round) return;
      // Every dispatcher takes a retry request up: the first offer schedules the attempt, due at once;
      // the others find it scheduled or claimed (a put would drop the claim and offer the attempt again).
      await offerWaiting(found);
    },

    async backlog() {
      // Together: a shared schedule answers both in one round trip (backpressure asks every 20 ms while busy).
      const [scheduled, nextDueAt] = await Promise.all([schedule.size(), schedule.nextDueAt()]);
      const waiting = scheduled + (parking?.lot.size() ?? 0);
      const parkedDueAt = parking?.lot.earliestDue() ?? null;
      // An event whose fan-out is under way has first attempts due since its commit, not in the schedule yet.
      let oldestDueAt = nextDueAt === null || parkedDueAt === null ? (nextDueAt ?? parkedDueAt) : Math.min(nextDueAt, parkedDueAt);
      for (const event of fanningOut) oldestDueAt = Math.min(oldestDueAt ?? Infinity, event.offset as number);
      return { waiting, oldestDueAt };
    },
    punctuality: async () => punctuality.figures(),
    start() {
      pump.start();
      if (parking === undefined) return;
      const { lot, horizonMs } = parking;
      sweeper = setInterval(() => lot.subscriptions().forEach(refill), horizonMs / 4);
    },

    async stop() {
      stopping = true;
      if (sweeper !== null) clearInterval(sweeper);
      await pump.stop();
      turns.stop();
      while (settling.size > 0) await Promise.allSettled([...settling]);
      await recorder.drain();
      parking?.lot.close();
    },
  };
  return dispatcher;
};
