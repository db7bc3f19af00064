// What the Redis read models share (the tickets' documents, the delivery history): applies queued
// and written a batch at a time (a round trip per event would hold every write behind one event loop
// turn per event), reads that tell an unreachable Redis apart, and dropping a store's keys.
import { ReplyError, type Redis } from 'ioredis';
import { StoreUnavailable } from './tickets-store.js';

/** Longer than the request-path default: a batch under load must not time out into a reset. */
export const READ_MODEL_COMMAND_TIMEOUT_MS = 2_000;
/** Events per script call: long enough to amortize the round trip, short enough not to stall Redis. */
export const APPLY_BATCH = 500;

/**
 * Lua binding a script to the data's epoch: `current` is the epoch key's value, made from the
 * candidate ARGV[2] when there is none (Redis lost the data), and then the keys `dropped` (the
 * checkpoint) go too. The script names its epoch key `epoch`.
 */
export const bindEpochLua = (dropped: string): string => `
local current = redis.call('GET', epoch)
if not current then
  current = ARGV[2]
  redis.call('SET', epoch, current)
  redis.call('DEL', ${dropped})
end`;

/** A client with a store's Lua scripts defined as commands (ioredis defineCommand). */
export type Scripted<S> = Redis & { [K in keyof S]: (...args: string[]) => Promise<unknown> };

/** A read of `what`: a failure to reach Redis (closed, timed out) is StoreUnavailable; an error Redis answered stays as it is. */
export const readOf =
  (what: string) =>
  async <T>(call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw error instanceof ReplyError ? error : new StoreUnavailable(`${what}: Redis unavailable (${(error as Error).message})`, { cause: error });
    }
  };

interface Queued<T> {
  readonly item: T;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
  readonly weight: number;
}

/** How a batch is made up, beyond its size. */
export interface BatchShape<T> {
  /** What an item counts toward the batch's size (default 1: a batch is at most `size` items). */
  readonly weight?: (item: T) => number;
  /**
   * How long a batch that is not full waits for more before it is written (default 0: at once). An
   * apply that rewrites whatever an item touches writes it once for all the items of a batch.
   */
  readonly lingerMs?: number;
}

/**
 * A queue that hands its items to `write` in order, a batch at a time: as many as weigh at most
 * `size` together (one at least), gathered for `lingerMs` when fewer are queued. When a batch fails,
 * it and everything queued behind it fail with its error: later items cannot be applied without it
 * (the projection runner resumes from its checkpoint).
 */
export const batchedApplies = <T>(size: number, write: (batch: readonly T[]) => Promise<void>, shape: BatchShape<T> = {}): ((item: T) => Promise<void>) => {
  const weight = shape.weight ?? (() => 1);
  const lingerMs = shape.lingerMs ?? 0;
  let queue: Queued<T>[] = [];
  /** The queue's weight in all. */
  let queued = 0;
  let flushing = false;
  /** Ends the linger under way early (the queue filled meanwhile). */
  let filled: (() => void) | null = null;
  const linger = (): Promise<void> =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        filled = null;
        resolve();
      }, lingerMs);
      filled = () => {
        clearTimeout(timer);
        filled = null;
        resolve();
      };
    });
  /** How many of the queue's first items make the next batch: those that weigh at most `size` together, one at least. */
  const nextBatch = (): number => {
    let count = 1;
    let total = (queue[0] as Queued<T>).weight;
    while (count < queue.length && total + (queue[count] as Queued<T>).weight <= size) total += (queue[count++] as Queued<T>).weight;
    return count;
  };
  const flush = async (): Promise<void> => {
    flushing = true;
    while (queue.length > 0) {
      if (lingerMs > 0 && queued < size) await linger();
      const batch = queue.slice(0, nextBatch());
      queue = queue.slice(batch.length);
      for (const queuedItem of batch) queued -= queuedItem.weight;
      try {
        await write(batch.map((queuedItem) => queuedItem.item));
        batch.forEach((queuedItem) => queuedItem.resolve());
      } catch (error) {
        const failed = [...batch, ...queue];
        queue = [];
        queued = 0;
        failed.forEach((queuedItem) => queuedItem.reject(error));
      }
    }
    flushing = false;
  };
  return (item) =>
    new Promise<void>((resolve, reject) => {
      const itemWeight = weight(item);
      queue.push({ item, resolve, reject, weight: itemWeight });
      queued += itemWeight;
      if (!flushing) void flush();
      else if (queued >= size) filled?.();
    });
};

/** Unlinks every key of a store (they share its hash tag). */
export const unlinkTagged = async (client: Redis, tag: string): Promise<void> => {
  for (let cursor = '0'; ; ) {
    const [next, found] = await client.scan(cursor, 'MATCH', `${tag}*`, 'COUNT', 1000);
    if (found.length > 0) await client.unlink(...found);
    cursor = next;
    if (cursor === '0') break;
  }
};
