// Redis DocumentStore for the distributed mode: the one copy of the read models that every API server
// reads and writes. It survives restarts, so a projection resumes from its checkpoint instead of
// replaying the log. Documents are JSON in one hash; each partition, and each (partition, filter
// field, value), is a sorted set of keys scored by the log position of the document's first save,
// i.e. creation order. A list (intersect, count, page, fetch) is one Lua script.
//
// Applies are queued and written in batches, one Lua script per batch (documents, indexes and
// checkpoint together, atomically): a round trip per event would hold every write request behind
// one event loop turn per event. Every API server applies the whole log, so an event reaches each
// document several times. Each document carries the position of the last event applied to it, and
// a batch is a compare-and-set on it per document: events at or below that position are already in
// the document; a document found at another position than the one the batch evolved it from comes
// back with the stored version, and the batch evolves it again from there (nothing is written until
// every document of the batch agrees). A cache of the documents this process wrote last saves the
// reads in the common case.
//
// An epoch key marks the data: a Redis that restarted without persistence (or was flushed) has none,
// and every apply then throws ProjectionReset, so each runner starts again from the checkpoint (none
// after a loss: a rebuild from the log). Connection failures throw ProjectionReset too.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ProjectionReset } from '../src/app/projection-runner.js';
import { createBoundedCache } from '../src/shared/bounded-cache.js';
import { createRedisClient, redisReady } from '../src/shared/redis.js';
import { succeedsWithin } from '../src/shared/within.js';
import { APPLY_BATCH, batchedApplies, bindEpochLua, READ_MODEL_COMMAND_TIMEOUT_MS, readOf, unlinkTagged, type Scripted } from './redis-read-models.js';
import type { DocumentProjection, DocumentStore, DocumentStores, EventRef } from './tickets-store.js';

// KEYS: docs (hash key → JSON), meta (hash key → "order at partition"), checkpoint (the position),
// ref (the checkpoint's EventRef as JSON), scratch, epoch. ARGV[1]: the prefix of partition and
// index keys. Positions stay strings (Lua's tostring rounds).
const PRELUDE = `
local docs, meta, checkpoint, ref, scratch, epoch, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], ARGV[1]
local function part(p) return prefix .. 'part:' .. p end
local function idx(p, field, value) return prefix .. 'idx:' .. p .. ':' .. field .. ':' .. value end
`;

const SCRIPTS = {
  // ARGV: prefix, candidate epoch. Returns the epoch (made from the candidate when there was none) and the checkpoint's ref.
  documentBind: `${bindEpochLua('checkpoint, ref')}
return { current, redis.call('GET', ref) or '' }`,

  // ARGV: prefix, epoch, checkpoint position, checkpoint ref JSON, number of filter fields, the
  // fields, then per document six values: key, from (position of the document the batch evolved,
  // '0' when absent), to (its last event in the batch), json ('' when unchanged), partition, order
  // (position of the event that created it, for a new document).
  // Returns {'reset'} | {'stale', key, at, json or false, ...} (nothing written) | {'ok', 'ok' or 'applied' per document}.
  documentApply: `
if redis.call('GET', epoch) ~= ARGV[2] then return { 'reset' } end
local fields, first = {}, 6 + tonumber(ARGV[5])
for i = 6, first - 1 do fields[#fields + 1] = ARGV[i] end
local found, stale = {}, {}
for i = first, #ARGV, 6 do
  local key = ARGV[i]
  local m = redis.call('HGET', meta, key)
  local f = { at = '0' }
  if m then
    local a = string.find(m, ' ', 1, true)
    local b = string.find(m, ' ', a + 1, true)
    f.order, f.at, f.part = string.sub(m, 1, a - 1), string.sub(m, a + 1, b - 1), string.sub(m, b + 1)
  end
  found[i] = f
  if tonumber(f.at) < tonumber(ARGV[i + 2]) and f.at ~= ARGV[i + 1] then
    stale[#stale + 1] = key
    stale[#stale + 1] = f.at
    stale[#stale + 1] = m and redis.call('HGET', docs, key) or false
  end
end
if #stale > 0 then return { 'stale', unpack(stale) } end
local out = { 'ok' }
for i = first, #ARGV, 6 do
  local key, to, json, p, f = ARGV[i], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], found[i]
  if tonumber(f.at) >= tonumber(to) then
    -- Applied already, by this process before a restart or by another one.
    out[#out + 1] = 'applied'
  else
    out[#out + 1] = 'ok'
    if json ~= '' then
      local order = f.order or ARGV[i + 5]
      local doc = cjson.decode(json)
      local old = f.part and cjson.decode(redis.call('HGET', docs, key))
      for _, field in ipairs(fields) do
        if old and type(old[field]) == 'string' then redis.call('ZREM', idx(f.part, field, old[field]), key) end
        if type(doc[field]) == 'string' then redis.call('ZADD', idx(p, field, doc[field]), order, key) end
      end
      if f.part and f.part ~= p then redis.call('ZREM', part(f.part), key) end
      redis.call('ZADD', part(p), order, key)
      redis.call('HSET', docs, key, json)
      redis.call('HSET', meta, key, order .. ' ' .. to .. ' ' .. p)
    end
  end
end
if tonumber(ARGV[3]) > tonumber(redis.call('GET', checkpoint) or '0') then
  redis.call('SET', checkpoint, ARGV[3])
  redis.call('SET', ref, ARGV[4])
end
return out`,

  // ARGV: prefix, partition, newestFirst ('1'/'0'), start, stop, then field, value pairs. Returns total, JSON...
  documentList: `
local sets = { part(ARGV[2]) }
for i = 6, #ARGV, 2 do sets[#sets + 1] = idx(ARGV[2], ARGV[i], ARGV[i + 1]) end
local from = sets[1]
if #sets > 1 then
  -- Every set scores a key the same: MIN keeps that score, the creation order.
  local args = { scratch, #sets, unpack(sets) }
  args[#args + 1] = 'AGGREGATE'
  args[#args + 1] = 'MIN'
  redis.call('ZINTERSTORE', unpack(args))
  from = scratch
end
local total = redis.call('ZCARD', from)
local keys
if ARGV[3] == '1' then keys = redis.call('ZRANGE', from, ARGV[4], ARGV[5], 'REV') else keys = redis.call('ZRANGE', from, ARGV[4], ARGV[5]) end
if #sets > 1 then redis.call('DEL', scratch) end
local out = { total }
if #keys > 0 then
  for _, json in ipairs(redis.call('HMGET', docs, unpack(keys))) do out[#out + 1] = json end
end
return out`,
} as const;

/** Documents remembered per store with the position they were written at (a few hundred bytes each). */
const CACHED_DOCUMENTS = 10_000;

interface Known<D> {
  /** Position of the last event applied to the document, '0' when it does not exist. */
  readonly at: string;
  readonly doc: D | undefined;
}

interface Queued<D> {
  readonly event: EventRef;
  readonly key: string | null;
  readonly evolve: (doc: D | undefined) => D | undefined;
}

/** One document's part of a batch: its events, and the document they make from `from`. */
interface Change<D> {
  readonly key: string;
  readonly events: Queued<D>[];
  from: Known<D>;
  doc: D | undefined;
  /** Position of the event that created the document in this batch, if one did. */
  order: number | null;
}

const refold = <D>(change: Change<D>): void => {
  let doc = change.from.doc;
  change.order = null;
  const from = Number(change.from.at);
  for (const { event, evolve } of change.events) {
    if (event.position <= from) continue;
    const next = evolve(doc);
    if (next === undefined || next === doc) continue;
    if (doc === undefined) change.order ??= event.position;
    doc = next;
  }
  change.doc = doc;
};

export interface RedisDocumentStoreOptions {
  /** A client from src/shared/redis.ts, shared by the process's stores. */
  readonly client: Redis;
  /** Namespaces the keys (tests, several deployments on one Redis). */
  readonly keyPrefix?: string;
}

export const createRedisDocumentStore = <D>(
  projection: Pick<DocumentProjection<D>, 'name' | 'version' | 'filters' | 'partitionOf'>,
  options: RedisDocumentStoreOptions,
): DocumentStore<D> => {
  const client = options.client as Scripted<typeof SCRIPTS>;
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 6, lua: PRELUDE + lua });
  // One hash tag per projection version: its keys share a cluster slot, as its scripts need.
  const tag = `{${options.keyPrefix ?? ''}rm:${projection.name}:v${projection.version}}`;
  const keys = [`${tag}:docs`, `${tag}:meta`, `${tag}:checkpoint`, `${tag}:ref`, `${tag}:scratch`, `${tag}:epoch`] as const;
  const prefix = `${tag}:`;
  const cache = createBoundedCache<Known<D>>(CACHED_DOCUMENTS);
  /** The epoch this process applies in, bound by checkpoint(); null until then and after a reset. */
  let epoch: string | null = null;

  const read = readOf(`read model ${projection.name}`);

  const remember = (key: string, at: string, doc: D): void => cache.set(key, { at, doc });

  const reset = (reason: string, cause?: unknown): ProjectionReset => {
    epoch = null;
    cache.clear();
    return new ProjectionReset(`read model ${projection.name}: ${reason}`, cause === undefined ? undefined : { cause });
  };

  const bind = async (): Promise<EventRef | null> => {
    const [bound, json] = (await client.documentBind(...keys, prefix, randomBytes(8).toString('hex'))) as [string, string];
    epoch = bound;
    return json === '' ? null : (JSON.parse(json) as EventRef);
  };

  const run = async (args: string[]): Promise<(string | null)[]> => {
    try {
      return (await client.documentApply(...keys, prefix, ...args)) as (string | null)[];
    } catch (error) {
      // The outcome is unknown: start again from the checkpoint, where every apply is idempotent.
      throw reset(`Redis unavailable (${(error as Error).message})`, error);
    }
  };

  /** Writes one batch: retried from the stored versions of its stale documents until it goes through. */
  const write = async (batch: readonly Queued<D>[]): Promise<void> => {
    if (epoch === null) throw reset('not bound to the stored data: read the checkpoint first');
    const changes = new Map<string, Change<D>>();
    for (const queued of batch) {
      if (queued.key === null) continue;
      let change = changes.get(queued.key);
      if (change === undefined) {
        change = { key: queued.key, events: [], from: cache.get(queued.key) ?? { at: '0', doc: undefined }, doc: undefined, order: null };
        changes.set(queued.key, change);
      }
      change.events.push(queued);
    }
    changes.forEach(refold);
    const { id, position, stream, revision } = (batch.at(-1) as Queued<D>).event;
    const head = [epoch, String(position), JSON.stringify({ id, position, stream, revision }), String(projection.filters.length), ...projection.filters];
    for (;;) {
      const args = [...head];
      for (const c of changes.values()) {
        const changed = c.doc !== undefined && c.doc !== c.from.doc;
        const to = (c.events.at(-1) as Queued<D>).event.position;
        args.push(c.key, c.from.at, String(to), changed ? JSON.stringify(c.doc) : '', changed ? projection.partitionOf(c.doc as D) : '', String(c.order ?? to));
      }
      const [status, ...rest] = await run(args);
      if (status === 'reset') throw reset('its data is gone (Redis restarted without persistence, or was flushed): rebuilding from the log');
      if (status === 'stale') {
        // Another process moved these documents since: evolve what it stored.
        for (let i = 0; i < rest.length; i += 3) {
          const change = changes.get(rest[i] as string) as Change<D>;
          const json = rest[i + 2] ?? null;
          change.from = { at: rest[i + 1] as string, doc: json === null ? undefined : (JSON.parse(json) as D) };
          refold(change);
        }
        continue;
      }
      [...changes.values()].forEach((c, i) => {
        if (rest[i] === 'applied') cache.delete(c.key);
        // An unchanged document was not written: Redis still has it at the position it came from.
        else if (c.doc !== c.from.doc) remember(c.key, String((c.events.at(-1) as Queued<D>).event.position), c.doc as D);
        else if (c.from.doc !== undefined) remember(c.key, c.from.at, c.from.doc);
      });
      return;
    }
  };

  const enqueue = batchedApplies(APPLY_BATCH, write);

  return {
    async checkpoint() {
      // A runner (re)starting waits here for Redis rather than failing.
      await redisReady(client);
      return bind();
    },
    async get(key) {
      const json = await read(() => client.hget(keys[0], key));
      return json === null ? undefined : (JSON.parse(json) as D);
    },
    apply: (event, key, evolve) => enqueue({ event, key, evolve }),
    async list(query) {
      const start = (query.page - 1) * query.pageSize;
      const where = Object.entries(query.where ?? {}).flat();
      const [total, ...docs] = (await read(() => client.documentList(...keys, prefix, query.partition, query.newestFirst ? '1' : '0', String(start), String(start + query.pageSize - 1), ...where))) as [number, ...string[]];
      return { items: docs.map((json) => JSON.parse(json) as D), total };
    },
    async dump() {
      const all = await read(() => client.hgetall(keys[0]));
      return new Map(Object.entries(all).map(([key, json]) => [key, JSON.parse(json) as D]));
    },
    async clear() {
      // The epoch goes too, so other processes reset.
      await unlinkTagged(client, tag);
      cache.clear();
      await bind();
    },
  };
};

/** The stores of one process, on one connection. */
export const createRedisDocumentStores = (options: { readonly url: string; readonly keyPrefix?: string }): DocumentStores => {
  const client = createRedisClient(options.url, 'command', { commandTimeoutMs: READ_MODEL_COMMAND_TIMEOUT_MS });
  let connected = false;
  const listeners: (() => void)[] = [];
  client.on('ready', () => {
    // Not the first connection: the runners have not bound to the data yet then.
    if (connected) listeners.forEach((listener) => listener());
    connected = true;
  });
  return {
    open: (projection) => createRedisDocumentStore(projection, { client, ...(options.keyPrefix === undefined ? {} : { keyPrefix: options.keyPrefix }) }),
    available: () => client.status === 'ready',
    connected: (timeoutMs) => succeedsWithin(redisReady(client), timeoutMs),
    onReconnect: (listener) => void listeners.push(listener),
    close: async () => client.disconnect(),
  };
};
