// The dispatcher side of the bus: a kafkajs consumer group on the topic of envelopes. Following the
// kafkajs pitfalls (DESIGN.md), the batch handler never throws and never sleeps: it decodes each
// message, hands the event to `handle` (which only records deliveries; workers send them later),
// heartbeats while a long batch runs, and resolves offsets only for the in-order prefix of the batch
// whose events are handled. A message that is not a valid envelope is logged and skipped.
// Resolved offsets are committed once a second (COMMIT_EVERY_MS), and at once when the consumer stops.
// When `handle` fails (the log is unreachable), the partition is rewound to the failed message and
// paused for `retryDelayMs`, so it is handed over again and nothing behind it is committed past it.
// When kafkajs restarts the consumer after a crash (a lone broker that closes its connections on a
// restart), it joins as a new member; the member it was is removed from the group on its behalf
// (leave-group.ts), so the group hands out the partitions at once instead of after a session.
// kafkajs stops a consumer for good, not restarting it, when no broker answered its FindCoordinator
// (kafkajs#1630): its only broker shutting down while it looked for the coordinator was enough. That
// cause is a broker away, not a fault that a restart repeats, so such a consumer is started again here.
import type { Consumer, EachBatchPayload, Kafka } from 'kafkajs';
import type { RecordedEvent } from '../log/event-log.js';
import { succeedsWithin } from '../shared/within.js';
import { reaching } from './kafka.js';
import { removeMember } from './leave-group.js';
import { fromMessage, PoisonMessage } from './message.js';

/** The longest a stop waits for the consumer to leave its group. */
const STOP_WAIT_MS = 5_000;
/**
 * How often resolved offsets are committed. kafkajs's autoCommit commits after every batch and waits
 * for it before it fetches the partition again: a round trip in each batch's path, and a commit for the
 * broker to write per batch (a few events each under paced load). A rebalance or a crash hands the
 * events of at most this long over again, which `handle` takes like any repeat.
 */
const COMMIT_EVERY_MS = 1_000;
/** Before a consumer that kafkajs stopped for good is started again: kafkajs's own restart waits its initial retry time. */
const START_AGAIN_MS = 300;
/** Errors that kafkajs stops a consumer for good on, though what causes them passes (a broker away). */
const PASSING = new Set(['KafkaJSGroupCoordinatorNotFound']);

/** Whether `error` or one of its causes is one that passes. */
const passes = (error: unknown): boolean => {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 8; cause = cause.cause, depth++) if (PASSING.has(cause.name)) return true;
  return false;
};

export interface BusConsumerOptions {
  readonly kafka: Kafka;
  /** The bootstrap brokers of `kafka`, for removing the member a restarted consumer was. */
  readonly brokers: readonly string[];
  readonly topic: string;
  readonly group: string;
  /** Idempotent per event (a rebalance or a crash hands an event over again); resolves once its work is durable. */
  readonly handle: (record: RecordedEvent) => Promise<void>;
  readonly retryDelayMs?: number;
  /** How long Kafka waits for a silent member (a killed dispatcher) before its partitions move; 30 s by default. */
  readonly sessionTimeoutMs?: number;
  /** Events of one batch handled at the same time, at most. */
  readonly window?: number;
  readonly partitionsConsumedConcurrently?: number;
  readonly onError?: (error: unknown) => void;
  /** This member joined the group (at its start, and after every rebalance): its partitions may hand over events another member handled. */
  readonly onJoined?: () => void;
  /** kafkajs stopped the consumer for good (an error it does not retry, such as a group whose members use other assignors): nothing is consumed until a restart. */
  readonly onStopped?: (error: Error) => void;
  /** The consumer crashed, and what followed (for the dispatcher's metrics). */
  readonly onCrash?: (outcome: CrashOutcome) => void;
}

/** What followed a crash of the kafkajs consumer: kafkajs restarted it, it is started again here, or it stopped for good. */
export type CrashOutcome = 'restarted' | 'started_again' | 'stopped';

export interface BusConsumer {
  start(): Promise<void>;
  stop(): Promise<void>;
}

export const createBusConsumer = (options: BusConsumerOptions): BusConsumer => {
  const { kafka, topic, handle } = options;
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const window = options.window ?? 256;
  const sessionTimeout = options.sessionTimeoutMs ?? 30_000;
  const onError = options.onError ?? ((error: unknown) => console.error('bus consumer:', error));
  let consumer: Consumer | null = null;
  const resumeTimers = new Set<NodeJS.Timeout>();
  /** Aborted by a stop: ends a removal of the member a consumer was, and starting a consumer again. */
  let running = new AbortController();
  const relaunches = new Set<NodeJS.Timeout>();
  let committer: NodeJS.Timeout | null = null;
  /**
   * Commits the offsets resolved since the last commit, through the consumer group of the last batch:
   * null before the first batch, and once that group's generation is over (a failed commit, a crash),
   * until the next batch brings the current one.
   */
  let commitResolved: (() => Promise<void>) | null = null;
  let committing: Promise<void> | null = null;

  /** One commit at a time: a broker that is away is retried by the one under way, not by a pile of them. */
  const commit = (): Promise<void> => {
    const resolved = commitResolved;
    if (resolved === null) return Promise.resolve();
    committing ??= resolved()
      .catch((error: unknown) => {
        if (commitResolved === resolved) commitResolved = null;
        onError(error);
      })
      .finally(() => {
        committing = null;
      });
    return committing;
  };

  /** Runs `handle` over the batch in order, `window` at a time; how many lead messages are done, and whether one failed. */
  const handleAll = async (payload: EachBatchPayload): Promise<{ done: number; failed: boolean }> => {
    const { messages } = payload.batch;
    const done = messages.map(() => false);
    let failedAt = messages.length;
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < messages.length; i = next++) {
        const message = messages[i];
        if (message === undefined || !payload.isRunning() || failedAt < i) continue;
        try {
          await handle(fromMessage(message));
          done[i] = true;
        } catch (error) {
          if (error instanceof PoisonMessage) {
            onError(new Error(`${topic}[${payload.batch.partition}]@${message.offset} skipped: ${error.message}`));
            done[i] = true;
          } else {
            failedAt = Math.min(failedAt, i);
            onError(error);
          }
        }
        // Sent only when the heartbeat interval has passed; a rebalance shows at commit time instead.
        await payload.heartbeat().catch(() => undefined);
      }
    };
    await Promise.all(Array.from({ length: Math.min(window, messages.length) }, worker));
    const prefix = done.indexOf(false);
    return { done: prefix === -1 ? messages.length : prefix, failed: failedAt < messages.length };
  };

  const eachBatch = async (payload: EachBatchPayload): Promise<void> => {
    const { batch } = payload;
    const { done, failed } = await handleAll(payload);
    const last = batch.messages[done - 1];
    try {
      if (last !== undefined) payload.resolveOffset(last.offset);
      commitResolved = () => payload.commitOffsetsIfNecessary(payload.uncommittedOffsets());
      // Stopping: the group is left next, and what this batch did would be handed over again.
      if (!payload.isRunning()) await commitResolved();
    } catch (error) {
      // The partition moved to another member meanwhile; it starts from the last commit (idempotent).
      onError(error);
    }
    const retry = batch.messages[done];
    if (!failed || retry === undefined || consumer === null) return;
    consumer.seek({ topic, partition: batch.partition, offset: retry.offset });
    const resume = payload.pause();
    const timer = setTimeout(() => {
      resumeTimers.delete(timer);
      resume();
    }, retryDelayMs);
    resumeTimers.add(timer);
  };

  /** Starts a kafkajs consumer of its own, as a new member; started again, unless `signal` aborted, if kafkajs stops it for a cause that passes. */
  const launch = async (signal: AbortSignal): Promise<void> => {
    const created = kafka.consumer({
      groupId: options.group,
      sessionTimeout,
      // Well under the third of the session kafkajs asks for: 3 s at 30 s, kafkajs's own default.
      heartbeatInterval: Math.floor(sessionTimeout / 10),
      // Short fetch waits: a resumed partition and a stop are not held up by an idle long poll.
      maxWaitTimeInMs: 1000,
      retry: { retries: Number.MAX_SAFE_INTEGER, initialRetryTime: 300, maxRetryTime: 5000 },
    });
    consumer = created;
    let member: string | null = null;
    created.on(created.events.GROUP_JOIN, ({ payload }) => {
      member = payload.memberId;
      options.onJoined?.();
    });
    created.on(created.events.CRASH, ({ payload }) => {
      if (consumer !== created) return;
      // The group's generation is over: its resolved offsets cannot be committed any more.
      commitResolved = null;
      const startAgain = !payload.restart && passes(payload.error);
      options.onCrash?.(payload.restart ? 'restarted' : startAgain ? 'started_again' : 'stopped');
      if (!payload.restart && !startAgain) {
        const error = new Error(`kafkajs stopped the consumer of ${topic} in group ${options.group} for good: ${payload.error.message}`, { cause: payload.error });
        onError(error);
        options.onStopped?.(error);
        return;
      }
      const how = startAgain ? `kafkajs stopped the consumer after: ${payload.error.message}; it starts again` : `kafkajs restarts the consumer after: ${payload.error.message}`;
      if (startAgain) relaunch(signal);
      if (member === null) return onError(new Error(how));
      const memberId = member;
      member = null;
      onError(new Error(`${how}; the member it was (${memberId}) leaves the group`));
      removeMember({ brokers: options.brokers, clientId: `${options.group}-leave`, groupId: options.group, memberId }, { signal }).catch((error: unknown) => {
        if (!signal.aborted) onError(error);
      });
    });
    await reaching(async () => {
      await created.connect();
      // A new group starts at the beginning: events relayed before the first dispatcher started count.
      await created.subscribe({ topic, fromBeginning: true });
    });
    // Stopped meanwhile (a start again under way): the stop may have disconnected before the connect.
    if (signal.aborted) return created.disconnect();
    await created.run({
      // Committed every COMMIT_EVERY_MS (start) instead of after every batch.
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 4,
      eachBatch,
    });
  };

  /** Starts a consumer again after START_AGAIN_MS, and again after each start that fails (Kafka still away), until a stop. */
  const relaunch = (signal: AbortSignal): void => {
    const timer = setTimeout(() => {
      relaunches.delete(timer);
      launch(signal).catch((error: unknown) => {
        if (signal.aborted) return;
        onError(error);
        relaunch(signal);
      });
    }, START_AGAIN_MS);
    relaunches.add(timer);
  };

  return {
    async start() {
      const { signal } = (running = new AbortController());
      await launch(signal);
      committer = setInterval(() => void commit(), COMMIT_EVERY_MS);
      committer.unref();
    },
    async stop() {
      if (committer !== null) clearInterval(committer);
      committer = null;
      // What was handled since the last commit is not handed over again; a broker that is away is not waited for.
      await succeedsWithin(commit(), STOP_WAIT_MS);
      commitResolved = null;
      resumeTimers.forEach(clearTimeout);
      resumeTimers.clear();
      running.abort();
      relaunches.forEach(clearTimeout);
      relaunches.clear();
      const stopping = consumer;
      consumer = null;
      // While the broker is away kafkajs's disconnect waits out the client's retries (a dispatcher's
      // last a minute): a stop goes on after STOP_WAIT_MS and leaves it to finish alone.
      if (stopping !== null) await succeedsWithin(stopping.disconnect(), STOP_WAIT_MS);
    },
  };
};
