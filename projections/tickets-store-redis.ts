// Redis DocumentStore for the distributed mode: it survives restarts, so a projection resumes from
// its checkpoint instead of replaying the log. Documents are JSON in one hash; each partition, and
// each (partition, filter field, value), is a sorted set of keys scored by the log position of the
// document's first save, i.e. creation order. A save (document, indexes, checkpoint) and a list
// (intersect, count, page, fetch) are one Lua script each: atomic, one round trip.
import type { Redis } from 'ioredis';
import type { DocumentProjection, DocumentStore } from './tickets-store.js';

// KEYS: docs (hash key → JSON), meta (hash key → "order partition"), checkpoint, scratch.
// ARGV[1]: the prefix of partition and index keys. Positions stay strings (Lua's tostring rounds).
const PRELUDE = `
local docs, meta, checkpoint, scratch, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1]
local function part(p) return prefix .. 'part:' .. p end
local function idx(p, field, value) return prefix .. 'idx:' .. p .. ':' .. field .. ':' .. value end
`;

const SAVE = `
-- ARGV: prefix, position, key ('' for none), json, partition, filter fields...
local position, key = ARGV[2], ARGV[3]
if key ~= '' then
  local json, p = ARGV[4], ARGV[5]
  local doc = cjson.decode(json)
  local order, oldPart, old = position, nil, nil
  local m = redis.call('HGET', meta, key)
  if m then
    local space = string.find(m, ' ', 1, true)
    order, oldPart = string.sub(m, 1, space - 1), string.sub(m, space + 1)
    old = cjson.decode(redis.call('HGET', docs, key))
  end
  for i = 6, #ARGV do
    local field = ARGV[i]
    if old and type(old[field]) == 'string' then redis.call('ZREM', idx(oldPart, field, old[field]), key) end
    if type(doc[field]) == 'string' then redis.call('ZADD', idx(p, field, doc[field]), order, key) end
  end
  if oldPart and oldPart ~= p then redis.call('ZREM', part(oldPart), key) end
  redis.call('ZADD', part(p), order, key)
  redis.call('HSET', docs, key, json)
  redis.call('HSET', meta, key, order .. ' ' .. p)
end
if tonumber(position) > tonumber(redis.call('GET', checkpoint) or '0') then redis.call('SET', checkpoint, position) end
`;

const LIST = `
-- ARGV: prefix, partition, newestFirst ('1'/'0'), start, stop, then field, value pairs. Returns total, JSON...
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
return out
`;

type Scripted = Redis & {
  documentSave(...args: string[]): Promise<unknown>;
  documentList(...args: string[]): Promise<[number, ...string[]]>;
};

export interface RedisDocumentStoreOptions {
  /** A `command` client from src/shared/redis.ts, shared by the process's stores. */
  readonly client: Redis;
  /** Namespaces the keys (tests, several deployments on one Redis). */
  readonly keyPrefix?: string;
}

export const createRedisDocumentStore = <D>(
  projection: Pick<DocumentProjection<D>, 'name' | 'filters' | 'partitionOf'>,
  options: RedisDocumentStoreOptions,
): DocumentStore<D> => {
  const client = options.client as Scripted;
  client.defineCommand('documentSave', { numberOfKeys: 4, lua: PRELUDE + SAVE });
  client.defineCommand('documentList', { numberOfKeys: 4, lua: PRELUDE + LIST });
  // One hash tag per projection: its keys share a cluster slot, as its scripts need.
  const tag = `{${options.keyPrefix ?? ''}rm:${projection.name}}`;
  const keys = [`${tag}:docs`, `${tag}:meta`, `${tag}:checkpoint`, `${tag}:scratch`] as const;
  const prefix = `${tag}:`;

  return {
    checkpoint: async () => Number((await client.get(keys[2])) ?? 0),
    async get(key) {
      const json = await client.hget(keys[0], key);
      return json === null ? undefined : (JSON.parse(json) as D);
    },
    async save(position, change) {
      const doc = change === undefined ? [''] : [change.key, JSON.stringify(change.doc), projection.partitionOf(change.doc), ...projection.filters];
      await client.documentSave(...keys, prefix, String(position), ...doc);
    },
    async list(query) {
      const start = (query.page - 1) * query.pageSize;
      const where = Object.entries(query.where ?? {}).flat();
      const [total, ...docs] = await client.documentList(...keys, prefix, query.partition, query.newestFirst ? '1' : '0', String(start), String(start + query.pageSize - 1), ...where);
      return { items: docs.map((json) => JSON.parse(json) as D), total };
    },
    async dump() {
      const all = await client.hgetall(keys[0]);
      return new Map(Object.entries(all).map(([key, json]) => [key, JSON.parse(json) as D]));
    },
  };
};
