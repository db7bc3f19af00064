// Redis DocumentStore for the distributed mode: the one copy of the read models that every API server
// reads and writes. It survives restarts, so a projection resumes from its checkpoint instead of
// replaying the log. Documents are JSON in one hash; each partition, and each (partition, filter
// field, value), is a sorted set of keys scored by the log position of the document's first save,
// i.e. creation order. An apply (document, indexes, checkpoint) and a list (intersect, count, page,
// fetch) are one Lua script each: atomic, one round trip.
//
// Every API server applies the whole log, so an event reaches each document several times. Each
// document carries the position of the last event applied to it, and an apply is a compare-and-set
// on it: an event at or below that position is already in the document; one that finds the document
// at another position than the one it evolved from gets the stored document back and evolves again.
// A small cache of the documents this process wrote last saves the read in the common case.
//
// An epoch key marks the data: a Redis that restarted without persistence (or was flushed) has none,
// and every apply then throws ProjectionReset, so each runner starts again from the checkpoint (0
// after a loss: a rebuild from the log). Connection failures throw ProjectionReset too.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ProjectionReset } from '../src/app/projection-runner.js';
import { createRedisClient, redisReady } from '../src/shared/redis.js';
import type { DocumentProjection, DocumentStore, DocumentStores } from './tickets-store.js';

// KEYS: docs (hash key → JSON), meta (hash key → "order at partition"), checkpoint, scratch, epoch.
// ARGV[1]: the prefix of partition and index keys. Positions stay strings (Lua's tostring rounds).
const PRELUDE = `
local docs, meta, checkpoint, scratch, epoch, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1]
local function part(p) return prefix .. 'part:' .. p end
local function idx(p, field, value) return prefix .. 'idx:' .. p .. ':' .. field .. ':' .. value end
`;

const SCRIPTS = {
  // ARGV: prefix, candidate epoch. Returns the epoch (made from the candidate when there was none) and the checkpoint.
  documentBind: `
local current = redis.call('GET', epoch)
if not current then
  current = ARGV[2]
  redis.call('SET', epoch, current)
  redis.call('DEL', checkpoint)
end
return { current, redis.call('GET', checkpoint) or '0' }`,

  // ARGV: prefix, epoch, position, key ('' for none), at (position of the document evolved, '0' when
  // absent), json ('' when unchanged), partition, filter fields...
  // Returns {'ok'} | {'reset'} | {'stale', at, json or false}.
  documentApply: `
if redis.call('GET', epoch) ~= ARGV[2] then return { 'reset' } end
local position, key = ARGV[3], ARGV[4]
if key ~= '' then
  local order, at, oldPart = position, '0', nil
  local m = redis.call('HGET', meta, key)
  if m then
    local a = string.find(m, ' ', 1, true)
    local b = string.find(m, ' ', a + 1, true)
    order, at, oldPart = string.sub(m, 1, a - 1), string.sub(m, a + 1, b - 1), string.sub(m, b + 1)
  end
  if tonumber(at) >= tonumber(position) then
    -- Applied already, by this process before a restart or by another one.
    return { 'applied' }
  elseif at ~= ARGV[5] then
    return { 'stale', at, redis.call('HGET', docs, key) }
  elseif ARGV[6] ~= '' then
    local json, p = ARGV[6], ARGV[7]
    local doc = cjson.decode(json)
    local old = m and cjson.decode(redis.call('HGET', docs, key))
    for i = 8, #ARGV do
      local field = ARGV[i]
      if old and type(old[field]) == 'string' then redis.call('ZREM', idx(oldPart, field, old[field]), key) end
      if type(doc[field]) == 'string' then redis.call('ZADD', idx(p, field, doc[field]), order, key) end
    end
    if oldPart and oldPart ~= p then redis.call('ZREM', part(oldPart), key) end
    redis.call('ZADD', part(p), order, key)
    redis.call('HSET', docs, key, json)
    redis.call('HSET', meta, key, order .. ' ' .. position .. ' ' .. p)
  end
end
if tonumber(position) > tonumber(redis.call('GET', checkpoint) or '0') then redis.call('SET', checkpoint, position) end
return { 'ok' }`,

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

type Scripted = Redis & { [K in keyof typeof SCRIPTS]: (...args: string[]) => Promise<unknown> };

type ApplyReply = ['ok'] | ['applied'] | ['reset'] | ['stale', string, string | null];

interface Known<D> {
  /** Position of the last event applied to the document, '0' when it does not exist. */
  readonly at: string;
  readonly doc: D | undefined;
}

/** Longer than the request-path default: an apply under load must not time out into a reset. */
const COMMAND_TIMEOUT_MS = 2_000;

/** Documents remembered per store with the position they were written at (a few hundred bytes each). */
const CACHED_DOCUMENTS = 10_000;

export interface RedisDocumentStoreOptions {
  /** A client from src/shared/redis.ts, shared by the process's stores. */
  readonly client: Redis;
  /** Namespaces the keys (tests, several deployments on one Redis). */
  readonly keyPrefix?: string;
}

export const createRedisDocumentStore = <D>(
  projection: Pick<DocumentProjection<D>, 'name' | 'filters' | 'partitionOf'>,
  options: RedisDocumentStoreOptions,
): DocumentStore<D> => {
  const client = options.client as Scripted;
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 5, lua: PRELUDE + lua });
  // One hash tag per projection: its keys share a cluster slot, as its scripts need.
  const tag = `{${options.keyPrefix ?? ''}rm:${projection.name}}`;
  const keys = [`${tag}:docs`, `${tag}:meta`, `${tag}:checkpoint`, `${tag}:scratch`, `${tag}:epoch`] as const;
  const prefix = `${tag}:`;
  const cache = new Map<string, Known<D>>();
  /** The epoch this process applies in, bound by checkpoint(); null until then and after a reset. */
  let epoch: string | null = null;

  const remember = (key: string, at: string, doc: D): void => {
    cache.delete(key);
    cache.set(key, { at, doc });
    if (cache.size > CACHED_DOCUMENTS) cache.delete(cache.keys().next().value as string);
  };

  const reset = (reason: string, cause?: unknown): ProjectionReset => {
    epoch = null;
    cache.clear();
    return new ProjectionReset(`read model ${projection.name}: ${reason}`, cause === undefined ? undefined : { cause });
  };

  const run = async (...args: string[]): Promise<ApplyReply> => {
    try {
      return (await client.documentApply(...keys, prefix, ...args)) as ApplyReply;
    } catch (error) {
      // The outcome is unknown: start again from the checkpoint, where every apply is idempotent.
      throw reset(`Redis unavailable (${(error as Error).message})`, error);
    }
  };

  return {
    async checkpoint() {
      // A runner (re)starting waits here for Redis rather than failing.
      await redisReady(client);
      const [bound, at] = (await client.documentBind(...keys, prefix, randomBytes(8).toString('hex'))) as [string, string];
      epoch = bound;
      return Number(at);
    },
    async get(key) {
      const json = await client.hget(keys[0], key);
      return json === null ? undefined : (JSON.parse(json) as D);
    },
    async apply(position, key, evolve) {
      if (epoch === null) throw reset('not bound to the stored data: read the checkpoint first');
      let known: Known<D> = (key === null ? undefined : cache.get(key)) ?? { at: '0', doc: undefined };
      for (;;) {
        const doc = key === null ? undefined : evolve(known.doc);
        const changed = doc !== undefined && doc !== known.doc;
        const document = key === null || !changed ? [key ?? '', known.at, ''] : [key, known.at, JSON.stringify(doc), projection.partitionOf(doc), ...projection.filters];
        const reply = await run(epoch, String(position), ...document);
        if (reply[0] === 'reset') throw reset('its data is gone (Redis restarted without persistence, or was flushed): rebuilding from the log');
        if (key === null) return;
        if (reply[0] === 'ok') {
          if (changed) remember(key, String(position), doc);
          return;
        }
        if (reply[0] === 'applied') {
          // Another process is ahead on this document: what this one knows of it is behind.
          cache.delete(key);
          return;
        }
        // Stale: another process moved the document since; evolve what it stored.
        const [, at, json] = reply;
        known = { at, doc: json === null ? undefined : (JSON.parse(json) as D) };
        if (known.doc !== undefined) remember(key, at, known.doc);
      }
    },
    async list(query) {
      const start = (query.page - 1) * query.pageSize;
      const where = Object.entries(query.where ?? {}).flat();
      const [total, ...docs] = (await client.documentList(...keys, prefix, query.partition, query.newestFirst ? '1' : '0', String(start), String(start + query.pageSize - 1), ...where)) as [number, ...string[]];
      return { items: docs.map((json) => JSON.parse(json) as D), total };
    },
    async dump() {
      const all = await client.hgetall(keys[0]);
      return new Map(Object.entries(all).map(([key, json]) => [key, JSON.parse(json) as D]));
    },
  };
};

/** The stores of one process, on one connection. */
export const createRedisDocumentStores = (options: { readonly url: string; readonly keyPrefix?: string }): DocumentStores => {
  const client = createRedisClient(options.url, 'command', { commandTimeoutMs: COMMAND_TIMEOUT_MS });
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
    onReconnect: (listener) => void listeners.push(listener),
    close: async () => client.disconnect(),
  };
};
