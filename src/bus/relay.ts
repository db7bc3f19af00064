// The relay (role `relay`): tails the log in order from its durable checkpoint and produces every
// sequenced public event's envelope to the topic, keyed by workspace. Records are batched (up to
// `maxBatch`, waiting at most `lingerMs` for more) into one send with acks from all in-sync replicas.
// One send is in flight at a time and what the tail hands over meanwhile is the next batch, so batches
// grow with the load without lingering (0 by default: a batch is what one turn of the tail read).
// The checkpoint moves only past batches the broker acknowledged, so a crash repeats, never loses.
// A failed send is retried with a fresh producer until it goes through, holding everything behind it
// in order: while Kafka is down the tail stops reading (back-pressure) and catches up afterwards.
import { Partitioners, type Kafka, type Producer } from 'kafkajs';
import { PUBLIC_EVENT_TYPES } from '../domain/event-types.js';
import type { EventLog, LogSubscription, RecordedEvent } from '../log/event-log.js';
import type { RelayCheckpoint } from './checkpoint.js';
import { ensureTopic, reaching } from './kafka.js';
import { toMessage } from './message.js';
import { createSequencedLookup } from './sequenced.js';

export interface RelayOptions {
  readonly log: EventLog;
  readonly kafka: Kafka;
  readonly topic: string;
  readonly checkpoint: RelayCheckpoint;
  readonly lingerMs?: number;
  readonly maxBatch?: number;
  /** The checkpoint is written at most this often (and at stop); a crash repeats at most that much. */
  readonly checkpointEveryMs?: number;
  readonly retryDelayMs?: number;
  readonly onError?: (error: unknown) => void;
}

export interface Relay {
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Log position through which every public event is acknowledged by Kafka. */
  acknowledgedThrough(): number;
  /** Resolves once the events up to `position` are acknowledged; rejects if the relay fails first. */
  waitFor(position: number): Promise<void>;
  /** Why the relay stopped on its own (another relay took over), else null. */
  failure(): Error | null;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const createRelay = (options: RelayOptions): Relay => {
  const { log, kafka, topic, checkpoint } = options;
  const lingerMs = options.lingerMs ?? 0;
  const maxBatch = options.maxBatch ?? 500;
  const checkpointEveryMs = options.checkpointEveryMs ?? 1000;
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const onError = options.onError ?? ((error: unknown) => console.error('relay:', error));

  let buffer: RecordedEvent[] = [];
  /** Position of the last record the tail handed over (buffered or skipped). */
  let seenThrough = 0;
  let acked = 0;
  let written = 0;
  let lastWrite = 0;
  let stopping = false;
  let failed: Error | null = null;
  let producer: Producer | null = null;
  let subscription: LogSubscription | null = null;
  let sending: Promise<void> | null = null;
  let writing: Promise<void> | null = null;
  let linger: NodeJS.Timeout | null = null;
  let trailing: NodeJS.Timeout | null = null;
  let room: (() => void)[] = [];
  let waiters: { position: number; resolve: () => void; reject: (e: Error) => void }[] = [];

  const lookup = createSequencedLookup(log, { stopped: () => stopping });

  const release = () => {
    room.forEach((resolve) => resolve());
    room = [];
  };

  const settleWaiters = () => {
    const ready = waiters.filter((w) => failed !== null || w.position <= acked);
    waiters = waiters.filter((w) => !ready.includes(w));
    ready.forEach((w) => (failed === null ? w.resolve() : w.reject(failed)));
  };

  const fail = (error: Error) => {
    failed ??= error;
    onError(error);
    release();
    settleWaiters();
    void subscription?.stop();
  };

  const connectedProducer = async (): Promise<Producer> => {
    if (producer !== null) return producer;
    const fresh = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
    await fresh.connect();
    producer = fresh;
    return fresh;
  };

  /** True once acknowledged; false when stopping interrupted the retries. */
  const sendUntilAcked = async (batch: readonly RecordedEvent[]): Promise<boolean> => {
    const messages = batch.map(toMessage).map((m) => ({ key: m.key, value: m.value, headers: { ...m.headers } }));
    for (;;) {
      try {
        await (await connectedProducer()).send({ topic, acks: -1, messages });
        return true;
      } catch (error) {
        onError(error);
        // A producer that gave up may hold a stale producer id or sequence: start over with a new one.
        const stale = producer;
        producer = null;
        await stale?.disconnect().catch(() => undefined);
        if (stopping) return false;
        await sleep(retryDelayMs);
      }
    }
  };

  const writeCheckpoint = (): Promise<void> => {
    if (trailing !== null) clearTimeout(trailing);
    trailing = null;
    writing ??= (async () => {
      try {
        while (written < acked && failed === null) {
          const position = acked;
          lastWrite = Date.now();
          await checkpoint.write(position);
          written = position;
        }
      } catch (error) {
        fail(error as Error);
      } finally {
        writing = null;
      }
    })();
    return writing;
  };

  const scheduleCheckpoint = () => {
    const wait = lastWrite + checkpointEveryMs - Date.now();
    if (wait <= 0) void writeCheckpoint();
    else trailing ??= setTimeout(() => void writeCheckpoint(), wait);
  };

  const drainBuffer = async (): Promise<void> => {
    while (buffer.length > 0 && failed === null) {
      const batch = buffer.slice(0, maxBatch);
      buffer = buffer.slice(batch.length);
      const through = buffer.length === 0 ? seenThrough : (batch.at(-1) as RecordedEvent).position;
      if (buffer.length < 2 * maxBatch) release();
      if (!(await sendUntilAcked(batch))) {
        buffer = [...batch, ...buffer];
        return;
      }
      acked = through;
      settleWaiters();
      scheduleCheckpoint();
    }
  };

  const flush = () => {
    if (linger !== null) clearTimeout(linger);
    linger = null;
    if (sending !== null || buffer.length === 0) return;
    sending = drainBuffer().finally(() => {
      sending = null;
      // What arrived during the last send goes out at once: it has waited long enough.
      if (buffer.length > 0 && !stopping) flush();
    });
  };

  const handle = async (record: RecordedEvent): Promise<void> => {
    const sequenced = await lookup(record);
    if (sequenced !== null) buffer.push(sequenced);
    seenThrough = record.position;
    if (sending !== null) {
      // The next batch leaves when the current one is acknowledged; hold the tail when it is full.
      if (buffer.length >= 2 * maxBatch && failed === null && !stopping) await new Promise<void>((resolve) => room.push(resolve));
    } else if (buffer.length >= maxBatch) flush();
    else linger ??= setTimeout(flush, lingerMs);
  };

  return {
    async start() {
      await reaching(async () => {
        await ensureTopic(kafka, topic);
        await connectedProducer();
      });
      acked = written = seenThrough = await checkpoint.read();
      subscription = log.subscribe({ after: acked, types: PUBLIC_EVENT_TYPES }, handle);
      subscription.done.catch((error: unknown) => fail(error as Error));
    },

    async stop() {
      stopping = true;
      release();
      await subscription?.stop();
      // One last try to send what is buffered; what fails is relayed again by the next start.
      while (sending !== null) await sending;
      flush();
      while (sending !== null) await sending;
      if (written < acked) await writeCheckpoint();
      if (trailing !== null) clearTimeout(trailing);
      await producer?.disconnect().catch(() => undefined);
      producer = null;
    },

    acknowledgedThrough: () => acked,

    waitFor(position) {
      if (failed !== null) return Promise.reject(failed);
      if (position <= acked) return Promise.resolve();
      return new Promise((resolve, reject) => waiters.push({ position, resolve, reject }));
    },

    failure: () => failed,
  };
};
