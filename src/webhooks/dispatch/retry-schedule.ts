// The RetrySchedule port: deliveries waiting for their next attempt, by due time. Workers take due
// entries from it; a subscription at its in-flight limit is skipped, never waited for, so one slow
// endpoint cannot hold back the others. Embedded: memory, rebuilt from the log at start
// (retry-schedule/memory.ts). It holds no truth of its own: the log can always rebuild it.

export interface DueAttempt {
  readonly deliveryId: string;
  readonly subscriptionId: string;
  /** µs since the epoch. */
  readonly dueAt: number;
}

export interface RetrySchedule {
  /** Adds a delivery's next attempt, or moves it when the delivery is already there. */
  put(entry: DueAttempt): Promise<void>;
  remove(deliveryId: string): Promise<void>;
  /**
   * Removes and returns up to `limit` entries due at `now`, earliest first within a subscription,
   * and at most `room(subscriptionId)` entries of each subscription.
   */
  takeDue(now: number, limit: number, room: (subscriptionId: string) => number): Promise<DueAttempt[]>;
  /** The earliest due time (µs), or null when nothing is scheduled. */
  nextDueAt(): Promise<number | null>;
  size(): Promise<number>;
}
