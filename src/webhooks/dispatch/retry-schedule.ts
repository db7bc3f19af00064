// The RetrySchedule port: deliveries waiting for their next attempt, by due time. Workers take due
// entries from it; a subscription at its in-flight limit is skipped, never waited for, so one slow
// endpoint cannot hold back the others. Embedded: memory, rebuilt from the log at start
// (retry-schedule/memory.ts). It holds no truth of its own: the log can always rebuild it.

export interface DueAttempt {
  readonly deliveryId: string;
  readonly subscriptionId: string;
  /** µs since the epoch. */
  readonly dueAt: number;
  /**
   * The delivery's round of attempts: 1, then one more per manual retry. A manual retry is accepted
   * only once the previous round is settled in the log, so an entry of a later round replaces one of
   * an earlier round even while that one is still claimed (only its settling remove was left).
   */
  readonly round: number;
  /**
   * Set on a later attempt, or a manual retry's first: its due time is the delivery's next_attempt_at,
   * which the API shows. Once due it is taken before first attempts (even those due before it): its
   * subscription is served first in a take, and within it retries first. A backlog of new events must
   * not make announced retries late, and retries are few beside them.
   */
  readonly retry?: true;
  /**
   * Set by a shared schedule on an entry taken by the process that put it, and claimed by no other
   * since (an offer, or a lease run out, clears it): the delivery is as that process left it.
   */
  readonly ownPut?: true;
}

/**
 * Room that subscriptions share in a take (a workspace's): `of` names a subscription's pool (none:
 * undefined), `room` a pool's room, asked once per pool and take. A take charges a pool what its
 * subscriptions take, not what each could have taken: ten subscriptions with an attempt due each
 * share a pool of 64 whole, where granting each its own room of 16 up front would serve four.
 */
export interface SharedRoom {
  of(subscriptionId: string): string | undefined;
  room(pool: string): number;
}

export interface RetrySchedule {
  /**
   * The owner's move: adds each delivery's next attempt, or moves it (settling a claim) when the
   * delivery is already there. Several in one call cost one round trip (a fan-out's deliveries).
   */
  put(...entries: DueAttempt[]): Promise<void>;
  /**
   * Adds the entry unless the delivery is already scheduled or claimed in the same or a later round:
   * how a dispatcher announces a delivery it does not own (a retry request, a restart). A claim is
   * settled only by put/remove once the attempt is recorded, so a waiting delivery stays in the
   * schedule from its first put until it is settled, and an offer never brings back an attempt that
   * is under way. Several in one call cost about one round trip (a restart's, a re-seed's).
   */
  offer(...entries: DueAttempt[]): Promise<void>;
  /** Drops the delivery's entry; with `round`, only an entry of that round or an earlier one (a later round offered meanwhile stays). */
  remove(deliveryId: string, round?: number): Promise<void>;
  /**
   * Removes and returns up to `limit` entries due at `now`: subscriptions with a retry due first,
   * then by their earliest due entry; within a subscription its retries before its first attempts,
   * each earliest first; at most `room(subscriptionId)` entries of each subscription, and of the
   * subscriptions of one pool (`pools`) together at most its room. `room` is asked at most once per
   * subscription and take, so the caller may count what it grants. `look`, when given, is told what
   * nextDueAt() would answer once the take is done, in the take's own round trips where the schedule
   * is shared (a fill that arms its timer from it saves one).
   */
  takeDue(now: number, limit: number, room: (subscriptionId: string) => number, pools?: SharedRoom, look?: (nextDueAt: number | null) => void): Promise<DueAttempt[]>;
  /**
   * put(), then a take (as takeDue) of the entries' subscriptions only, in one step: a fan-out's new
   * attempts are taken by the dispatcher that puts them without a take of its own (a shared
   * schedule's two round trips). What the subscriptions had due before comes first, as in a take.
   */
  putAndTake(entries: readonly DueAttempt[], now: number, limit: number, room: (subscriptionId: string) => number, pools?: SharedRoom): Promise<DueAttempt[]>;
  /** The earliest due time (µs), or null when nothing is scheduled. */
  nextDueAt(): Promise<number | null>;
  size(): Promise<number>;
}

/**
 * A schedule several dispatchers share (Redis): a taken entry stays claimed for a lease, and the store
 * can lose every entry (a restart without persistence, a flush) while the log still has them waiting.
 */
export interface SharedRetrySchedule extends RetrySchedule {
  /** How long a taken entry stays claimed without put/remove. */
  readonly leaseMs: number;
  /**
   * `reseed` runs when the schedule finds its entries lost (looked for on every takeDue); it offers
   * the waiting deliveries again. Until it resolves the loss counts as not repaired: a failed reseed
   * runs again at a later take.
   */
  onLost(reseed: () => Promise<void>): void;
  ready(): Promise<void>;
  close(): Promise<void>;
}
