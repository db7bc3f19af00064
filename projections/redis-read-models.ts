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
}

/**
 * A queue that hands its items to `write`, at most `size` at a time, in order. When a batch fails,
 * it and everything queued behind it fail with its error: later items cannot be applied without it
 * (the projection runner resumes from its checkpoint).
 */
export const batchedApplies = <T>(size: number, write: (batch: readonly T[]) => Promise<void>): ((item: T) => Promise<void>) => {
  let queue: Queued<T>[] = [];
  let flushing = false;
  const flush = async (): Promise<void> => {
    flushing = true;
    while (queue.length > 0) {
      const batch = queue.slice(0, size);
      queue = queue.slice(size);
      try {
        await write(batch.map((queued) => queued.item));
        batch.forEach((queued) => queued.resolve());
      } catch (error) {
        const failed = [...batch, ...queue];
        queue = [];
        failed.forEach((queued) => queued.reject(error));
      }
    }
    flushing = false;
  };
  return (item) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (!flushing) void flush();
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
