// The delivery-history index in Redis, for the distributed mode: one copy that the dispatchers keep
// current and the API servers page from, so neither an API server nor a restarting dispatcher reads
// the whole delivery history.
//
// Layout (keys share one hash tag per DELIVERY_INDEX_VERSION: another version starts from empty keys,
// i.e. a rebuild from the log). `docs` and `ws` hash each delivery's JSON and workspace by id. Each
// filter combination of a subscription has a sorted set of ids scored by created_at (µs, exact in a
// double): (sub), (sub, status), (sub, event type), (sub, status, event type); equal scores sort by
// id, so a reverse range is the listing order and a page is a range of `limit` entries whatever the
// history's size. `waiting` (a set) and `ahead` (deliveries of events past the fan-out checkpoint,
// scored by event position) are what a restart takes over; `settled` (by created_at) is what retention
// prunes. `meta` holds the checkpoint, written by the same script as the rows it covers; `streams` the
// last record applied of each subscription's delivery stream (its revision, position and workspace),
// so a subscription's waiting deliveries are read with the revision they are as of.
//
// One writer applies at a time: the dispatcher index thread holding `lease` (a key with a deadline it
// renews, WriterLease); the others stand by without reading the log, and one of them takes the lease
// once it runs out (its holder died) or is given back (its holder stopped). A second dispatcher
// reading and folding every record to find it applied was busier than the writer in a profile of
// `npm run bench -- kafka` (without the profiler, the lease saved a few percent of the dispatchers'
// CPU). Two writers may still overlap (a holder that stalled past its deadline), so an apply stays
// safe against another: it reads the deliveries it touches and
// the checkpoint, folds the events above it, and writes only if the checkpoint has not moved since (a
// compare-and-set); otherwise another writer applied them first and it reads again. An epoch key marks
// the data: a Redis that restarted without persistence (or was flushed) has none, an apply then throws
// ProjectionReset and its runner rebuilds the index from the log; pending() refuses the same way, so a
// restart never takes over from an index that is being rebuilt. A read that cannot reach Redis throws
// StoreUnavailable (the routes answer 503).
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { ProjectionReset } from '../src/app/projection-runner.js';
import { unpackSteps, type Delivery } from '../src/domain/delivery/delivery.js';
import { createRedisClient, redisReady } from '../src/shared/redis.js';
import {
  DELIVERY_INDEX_VERSION,
  indexChange,
  noDeliveries,
  pendingWhole,
  NOTHING_APPLIED,
  type AppliedRecord,
  type DeliveryIndex,
  type HistoryQuery,
  type IndexCheckpoint,
  type IndexedDelivery,
  type PendingPages,
  type WaitingAsOf,
} from './deliveries-index.js';
import { batchedApplies, bindEpochLua, READ_MODEL_COMMAND_TIMEOUT_MS, readOf, unlinkTagged, type Scripted } from './redis-read-models.js';
import type { ProjectedEvent } from './tickets-store.js';

// KEYS: docs, ws, meta, waiting, ahead, settled, epoch, streams. ARGV[1]: the prefix of per-subscription keys.
// Scores and positions stay strings (Lua's tostring rounds numbers past 1e14).
const PRELUDE = `
local docs, ws, meta, waiting, ahead, settled, epoch, streams, prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], ARGV[1]
-- The deleted subscriptions whose deliveries are still being dropped (under the tag's prefix, with the others).
local forgetting = prefix .. 'forgetting'
local function sets(sub, status, etype)
  local base = prefix .. 's:' .. sub
  return base, base .. ':st:' .. status, base .. ':t:' .. etype, base .. ':st:' .. status .. ':t:' .. etype
end
-- Redis' clock, the same for every writer whatever host it runs on.
local function nowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- Appends each id, its JSON and its workspace to out (what a restart takes over).
local function withDocs(out, ids)
  for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', docs, id)
    out[#out + 1] = redis.call('HGET', ws, id)
  end
  return out
end
-- Drops one delivery and its entries, from what its JSON says.
local function drop(id)
  local json = redis.call('HGET', docs, id)
  if not json then return 0 end
  local d = cjson.decode(json)
  local all, bystatus, bytype, both = sets(d.subscriptionId, d.status, d.eventType)
  redis.call('ZREM', all, id)
  redis.call('ZREM', bystatus, id)
  redis.call('ZREM', bytype, id)
  redis.call('ZREM', both, id)
  redis.call('SREM', waiting, id)
  redis.call('ZREM', ahead, id)
  redis.call('ZREM', settled, id)
  if d.replayId and d.replayId ~= cjson.null then
    local replay = prefix .. 'r:' .. d.subscriptionId .. ':' .. d.replayId
    redis.call('SREM', replay .. ':st:' .. d.status, id)
    redis.call('SREM', replay .. ':attempted', id)
    redis.call('SREM', replay .. ':firsts', id)
  end
  redis.call('HDEL', docs, id)
  redis.call('HDEL', ws, id)
  return 1
end
-- Drops up to \`batch\` of a subscription's deliveries; true when it has more. Its set loses the ids
-- even where their JSON is gone, so that a dangling id cannot keep a forget going forever.
local function dropFirst(sub, batch)
  local all = prefix .. 's:' .. sub
  local ids = redis.call('ZRANGE', all, 0, batch - 1)
  for _, id in ipairs(ids) do drop(id) end
  if #ids > 0 then redis.call('ZREM', all, unpack(ids)) end
  return redis.call('EXISTS', all) == 1
end
`;

const SCRIPTS = {
  // ARGV: prefix, candidate epoch. Returns the epoch (the candidate when there was none: the data was
  // lost, and the checkpoint goes with it) and the checkpoint.
  historyBind: `${bindEpochLua('meta')}
return { current, redis.call('HGET', meta, 'position') or '0', redis.call('HGET', meta, 'fanned') or '0' }`,

  // ARGV: prefix, epoch, the batch's last position, this writer, how recent another writer's last
  // apply must be for this one to defer to it (ms, 0: never), then delivery ids. Returns {'reset'},
  // {'defer'} or {'ok', position, fan-out checkpoint, JSON or false per id}; no JSON when the
  // checkpoint is at or past the batch's last position (another writer applied it all).
  historyRead: `
if redis.call('GET', epoch) ~= ARGV[2] then return { 'reset' } end
local position = redis.call('HGET', meta, 'position') or '0'
local out = { 'ok', position, redis.call('HGET', meta, 'fanned') or '0' }
if tonumber(position) >= tonumber(ARGV[3]) then return out end
local last = redis.call('HMGET', meta, 'writer', 'wrote')
if tonumber(ARGV[5]) > 0 and last[1] and last[1] ~= ARGV[4] and nowMs() - tonumber(last[2]) < tonumber(ARGV[5]) then return { 'defer' } end
for i = 6, #ARGV do out[#out + 1] = redis.call('HGET', docs, ARGV[i]) end
return out`,

  // ARGV: prefix, epoch, expected position, new position, new fan-out checkpoint, writer, how many
  // streams moved, how many subscriptions were deleted, how many of a deleted one's deliveries to drop
  // here, per stream its subscription and last record applied ('revision position workspace'), the
  // deleted subscriptions, then per delivery: id, subscription, workspace, status, stored status (''
  // when new), event type, event position, created_at, replay id ('' for a live delivery), attempted
  // ('1' or '0'), JSON. Returns 'reset', 'moved' (another writer got there first: nothing written) or
  // 'ok'. A deleted subscription's first deliveries go with the checkpoint that passes its marker (a
  // short history whole); a longer one joins `forgetting`, and the rest go after (historyForget, by
  // whichever writer applies). Nothing more of a deleted subscription is written meanwhile. A
  // replay's deliveries are also in a set per status and one of those attempted, for its counts, and
  // those waiting never attempted in one more, `firsts`, by which its driver paces itself. (Kept from
  // release 2026-11-30 on, without a rebuild: a replay's delivery scheduled before then and not
  // attempted by then is never in it, a few at most, which its driver's pacing misses once; a restart
  // offers every waiting delivery to the schedule anyway.)
  historyApply: `
if redis.call('GET', epoch) ~= ARGV[2] then return 'reset' end
if (redis.call('HGET', meta, 'position') or '0') ~= ARGV[3] then return 'moved' end
local fanned = ARGV[5]
local moved, deleted, batch = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local first = 10 + 2 * moved
local gone = {}
for i = first, first + deleted - 1 do
  local sub = ARGV[i]
  gone[sub] = true
  redis.call('HDEL', streams, sub)
  if dropFirst(sub, batch) then redis.call('SADD', forgetting, sub) end
end
local function isGone(sub)
  if gone[sub] == nil then gone[sub] = redis.call('SISMEMBER', forgetting, sub) == 1 end
  return gone[sub]
end
for i = 10, 9 + 2 * moved, 2 do
  if not isGone(ARGV[i]) then redis.call('HSET', streams, ARGV[i], ARGV[i + 1]) end
end
for i = first + deleted, #ARGV, 11 do
  local id, sub, workspace, status, was, etype, epos, created, replay, attempted, json = unpack(ARGV, i, i + 10)
  if not isGone(sub) then
    if replay ~= '' then
      local base = prefix .. 'r:' .. sub .. ':' .. replay
      if was ~= '' and was ~= status then redis.call('SREM', base .. ':st:' .. was, id) end
      redis.call('SADD', base .. ':st:' .. status, id)
      if attempted == '1' then redis.call('SADD', base .. ':attempted', id) end
      if status == 'waiting' and attempted == '0' then redis.call('SADD', base .. ':firsts', id) else redis.call('SREM', base .. ':firsts', id) end
    end
    -- A delivery's subscription, event type, creation time and workspace never change: a stored one
    -- moves only between the sets of its status, and only when its status changed.
    if was ~= status then
      local all, bystatus, bytype, both = sets(sub, status, etype)
      if was == '' then
        redis.call('ZADD', all, created, id)
        redis.call('ZADD', bytype, created, id)
        redis.call('HSET', ws, id, workspace)
      else
        local _, oldstatus, _, oldboth = sets(sub, was, etype)
        redis.call('ZREM', oldstatus, id)
        redis.call('ZREM', oldboth, id)
      end
      redis.call('ZADD', bystatus, created, id)
      redis.call('ZADD', both, created, id)
      if status == 'waiting' then
        redis.call('SADD', waiting, id)
        if was ~= '' then redis.call('ZREM', settled, id) end
      else
        if was == 'waiting' then redis.call('SREM', waiting, id) end
        redis.call('ZADD', settled, created, id)
      end
    end
    redis.call('HSET', docs, id, json)
    -- The fan-out checkpoint only rises: a stored delivery past it was put in 'ahead' when it was new.
    if was == '' and tonumber(epos) > tonumber(fanned) then redis.call('ZADD', ahead, epos, id) end
  end
end
redis.call('ZREMRANGEBYSCORE', ahead, '-inf', fanned)
redis.call('HSET', meta, 'position', ARGV[4], 'fanned', fanned, 'writer', ARGV[6], 'wrote', nowMs())
return 'ok'`,

  // ARGV: prefix, key suffix of the filter's set, upper bound (inclusive score, '+inf' for none), the
  // cursor's id at that score ('' to take the whole score), lower bound ('-inf' for none), count.
  // Returns the JSON of up to `count` deliveries in listing order.
  historyPage: `
local key = prefix .. ARGV[2]
local upper, after, lower, count = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local ids = {}
if after ~= '' then
  -- The cursor's own creation time: only the ids listed after it (smaller), then strictly older ones.
  for _, id in ipairs(redis.call('ZREVRANGEBYSCORE', key, upper, upper)) do
    if id < after and #ids < count then ids[#ids + 1] = id end
  end
  upper = '(' .. upper
end
if #ids < count then
  for _, id in ipairs(redis.call('ZREVRANGEBYSCORE', key, upper, lower, 'LIMIT', 0, count - #ids)) do ids[#ids + 1] = id end
end
if #ids == 0 then return {} end
return redis.call('HMGET', docs, unpack(ids))`,

  // What a restart takes over, read a page at a time: one script over every waiting delivery held
  // Redis (and timed out) for seconds at a few hundred thousand.
  // ARGV: prefix, epoch, SSCAN cursor, count. Returns {'reset'} or {'ok', next cursor, then id, JSON, workspace per waiting delivery}.
  historyPendingPage: `
if redis.call('GET', epoch) ~= ARGV[2] then return { 'reset' } end
local page = redis.call('SSCAN', waiting, ARGV[3], 'COUNT', ARGV[4])
return withDocs({ 'ok', page[1] }, page[2])`,

  // ARGV: prefix, epoch. Returns {'reset'} or {'ok', fan-out checkpoint, then id, JSON, workspace per
  // delivery of an event past it (few: the newest)}.
  historyPendingAhead: `
if redis.call('GET', epoch) ~= ARGV[2] then return { 'reset' } end
local fanned = redis.call('HGET', meta, 'fanned') or '0'
return withDocs({ 'ok', fanned }, redis.call('ZRANGEBYSCORE', ahead, '(' .. fanned, '+inf'))`,

  // ARGV: prefix, subscription, replay. Returns the checkpoint's position, then the JSON of each of the replay's deliveries waiting never attempted.
  historyReplayFirsts: `
local out = { redis.call('HGET', meta, 'position') or '0' }
for _, id in ipairs(redis.call('SMEMBERS', prefix .. 'r:' .. ARGV[2] .. ':' .. ARGV[3] .. ':firsts')) do out[#out + 1] = redis.call('HGET', docs, id) end
return out`,

  // ARGV: prefix, subscription. Returns its last record applied ('' when none), then the JSON of each of its waiting deliveries.
  historyWaitingOf: `
local out = { redis.call('HGET', streams, ARGV[2]) or '' }
if out[1] == '' then return out end
for _, id in ipairs(redis.call('ZRANGE', prefix .. 's:' .. ARGV[2] .. ':st:waiting', 0, -1)) do out[#out + 1] = redis.call('HGET', docs, id) end
return out`,

  // ARGV: prefix, cutoff (exclusive), limit. Settled deliveries only; those of events past the fan-out
  // checkpoint (few: the newest) are skipped. Returns how many went.
  historyPrune: `
local limit = tonumber(ARGV[3])
local candidates = redis.call('ZRANGEBYSCORE', settled, '-inf', '(' .. ARGV[2], 'LIMIT', 0, limit + redis.call('ZCARD', ahead))
local pruned = 0
for _, id in ipairs(candidates) do
  if pruned == limit then break end
  if not redis.call('ZSCORE', ahead, id) then pruned = pruned + drop(id) end
end
return pruned`,

  // ARGV: prefix, subscription, batch. Drops up to `batch` of its deliveries; returns 1 while some
  // are left. The call that drops the last takes the subscription out of `forgetting`, so that it
  // leaves the set the moment its deliveries are gone (the call after, which once did it, came a
  // round trip later: CI saw the gap).
  historyForget: `
redis.call('HDEL', streams, ARGV[2])
if dropFirst(ARGV[2], tonumber(ARGV[3])) then return 1 end
redis.call('SREM', forgetting, ARGV[2])
return 0`,
} as const;

/** Delivery steps per apply script at most (a packed record holds many: a rebuild reads those): a script of a thousand new deliveries holds Redis about 12 ms. */
const BATCH = 1_000;
/**
 * A batch not full is gathered this long before it is applied, as the embedded index commits
 * (COMMIT_AFTER_MS): a delivery's steps (scheduled, attempted) then mostly land in one apply, which
 * reads, folds and writes it once, in its last state, and moves it between the sets of its status
 * once. The index is that much later: where a reader needs it current it waits for it (a restart's
 * take-over; a Kafka dispatcher after a rebalance, src/bus/webhook-source.ts) or adds the records it
 * has not applied (a retry, a waiting view); pages show a delivery that much later.
 */
export const LINGER_MS = 100;
/**
 * Every dispatcher applies the same log, and two of them read each commit at the same moment: both
 * folded each batch and sent it, and one of the two was refused ('moved'): 15-17% of each of two
 * dispatchers' main threads in a profile of `npm run bench -- kafka`. A writer therefore leaves a batch to the writer that
 * applied last, while that one applied within ACTIVE_WRITER_MS: it looks again after DEFER_MS,
 * usually to find the batch applied, and applies it itself after MAX_DEFERS looks (the other one
 * died, or is further behind), becoming the writer the others leave batches to.
 */
const ACTIVE_WRITER_MS = 1_000;
const DEFER_MS = 50;
const MAX_DEFERS = 10;
/** Deliveries dropped per script by forget (a subscription's history may be large). */
const FORGET_BATCH = 1_000;

/** The set a query reads: the subscription's, or the one of its filter combination. */
const setOf = (query: HistoryQuery): string =>
  `s:${query.subscriptionId}${query.status === undefined ? '' : `:st:${query.status}`}${query.eventType === undefined ? '' : `:t:${query.eventType}`}`;

/** A stream's last record applied as `streams` has it ('revision position workspace'; '' for none). */
const appliedRecordOf = (text: string): Omit<WaitingAsOf, 'deliveries'> => {
  if (text === '') return NOTHING_APPLIED;
  const [revision, position, ...workspace] = text.split(' ');
  return { revision: Number(revision), position: Number(position), workspaceId: workspace.join(' ') };
};

/** The lease of the one writer that applies the log to a shared index. */
export interface WriterLease {
  /** Takes the lease for this writer, or keeps it, for `ms` more; false while another writer holds it. */
  lease(ms: number): Promise<boolean>;
  /** Gives the lease back when this writer holds it, so a standby takes over at once. */
  release(): Promise<void>;
  /** The log position the index has applied, by whichever writer: read only (a standby binds nothing by it). */
  appliedThrough(): Promise<number>;
}

// KEYS: the lease. ARGV: this writer, the lease's length in ms.
const LEASE_TAKE = `
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`;
const LEASE_RELEASE = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 0`;

export interface RedisDeliveryIndexOptions {
  readonly client: Redis;
  /** Namespaces the keys (tests, several deployments on one Redis). */
  readonly keyPrefix?: string;
  /** Waiting deliveries a restart's read takes per script call (about; default PENDING_PAGE). */
  readonly pendingPage?: number;
  /** How long a batch not full is gathered before it is applied (default LINGER_MS; 0: at once, tests that apply one event at a time). */
  readonly lingerMs?: number;
}

/** About this many waiting deliveries per script call of `pending`: each holds Redis a few milliseconds. */
export const PENDING_PAGE = 1_000;

export const createRedisDeliveryIndex = (options: RedisDeliveryIndexOptions): DeliveryIndex & WriterLease => {
  const client = options.client as Scripted<typeof SCRIPTS & { historyLeaseTake: string; historyLeaseRelease: string }>;
  const pendingPage = options.pendingPage ?? PENDING_PAGE;
  for (const [name, lua] of Object.entries(SCRIPTS)) client.defineCommand(name, { numberOfKeys: 8, lua: PRELUDE + lua });
  client.defineCommand('historyLeaseTake', { numberOfKeys: 1, lua: LEASE_TAKE });
  client.defineCommand('historyLeaseRelease', { numberOfKeys: 1, lua: LEASE_RELEASE });
  const tag = `{${options.keyPrefix ?? ''}dh:v${DELIVERY_INDEX_VERSION}}`;
  const keys = ['docs', 'ws', 'meta', 'waiting', 'ahead', 'settled', 'epoch', 'streams'].map((name) => `${tag}:${name}`);
  const prefix = `${tag}:`;
  const leaseKey = `${tag}:lease`;
  const forgettingKey = `${prefix}forgetting`;
  /** The epoch this process applies in, bound by checkpoint(); null until then and after a reset. */
  let epoch: string | null = null;
  /** Names this writer in the checkpoint it moves (the others defer to it while it keeps applying). */
  const writer = randomBytes(8).toString('hex');

  const reach = readOf('delivery history index');

  const reset = (reason: string, cause?: unknown): ProjectionReset => {
    epoch = null;
    return new ProjectionReset(`delivery history index: ${reason}`, cause === undefined ? undefined : { cause });
  };
  const lost = () => reset('its data is gone (Redis restarted without persistence, or was flushed): rebuilding it from the log');

  /** A write: its outcome is unknown when Redis cannot be reached, so the runner starts again from the checkpoint. */
  const write = async <T>(call: () => Promise<T>): Promise<T> => {
    if (epoch === null) throw reset('not bound to the stored data: read the checkpoint first');
    try {
      return await call();
    } catch (error) {
      throw reset(`Redis unavailable (${(error as Error).message})`, error);
    }
  };

  const bind = async (): Promise<IndexCheckpoint> => {
    const [bound, position, fanned] = (await client.historyBind(...keys, prefix, randomBytes(8).toString('hex'))) as [string, string, string];
    epoch = bound;
    return { position: Number(position), fannedOutThrough: Number(fanned) };
  };

  /** A run of `forgetMarked` under way; `forgetDue` asks it (or the next) for another look at the set. */
  let forgetting: Promise<void> | null = null;
  let forgetDue = false;
  /** Set by close: a forget stops between scripts (what is left stays in `forgetting`). */
  let closed = false;

  const forgetAll = async (subscriptionId: string): Promise<void> => {
    while (!closed && Number(await client.historyForget(...keys, prefix, subscriptionId, String(FORGET_BATCH))) === 1);
  };
  /**
   * Drops the deliveries of every subscription in `forgetting`, in the background. Dropped before the
   * apply that passed the marker (as they were), 400,000 deliveries held every other subscription's
   * records out of the index 4.6 s, and a dispatcher joining meanwhile waited that long to fan out.
   * A writer that stops part way leaves the set: the next one to bind or apply a deletion goes on.
   */
  const forgetMarked = (): void => {
    forgetDue = true;
    if (forgetting !== null || closed) return;
    let failed = false;
    forgetting = (async () => {
      while (forgetDue && !closed) {
        forgetDue = false;
        for (let id = await client.srandmember(forgettingKey); id !== null && !closed; id = await client.srandmember(forgettingKey)) await forgetAll(id);
      }
    })()
      .catch((error: unknown) => {
        failed = true;
        if (!closed) console.error('delivery history index: dropping deleted subscriptions\' deliveries stopped (the next apply of a deletion, or start, goes on):', error);
      })
      .finally(() => {
        forgetting = null;
        if (forgetDue && !failed) forgetMarked();
      });
  };

  /**
   * Applies a batch of events in log order, reading again whenever another writer moved the
   * checkpoint first. A deleted subscription joins `forgetting` with the checkpoint that passes its
   * deletion, and nothing of it is written from then on; its deliveries go after (`forgetMarked`).
   */
  const applyBatch = async (batch: readonly ProjectedEvent[]): Promise<void> => {
    const ids = [...new Set(batch.flatMap((event) => unpackSteps(event).map((step) => String(step.data['delivery_id']))))];
    const batchLast = String(batch.at(-1)?.position ?? 0);
    for (let defers = 0; ; ) {
      const deferMs = String(defers < MAX_DEFERS ? ACTIVE_WRITER_MS : 0);
      const [status, position, fanned, ...found] = (await write(() => client.historyRead(...keys, prefix, epoch as string, batchLast, writer, deferMs, ...ids))) as [string, string, string, ...(string | null)[]];
      if (status === 'reset') throw lost();
      if (status === 'defer') {
        defers += 1;
        await sleep(DEFER_MS);
        continue;
      }
      // Another writer applied the whole batch: nothing to fold or write (the common case for the
      // second of two dispatchers, which tails the same log). Past here the batch's last event is
      // above the checkpoint, so the apply moves the checkpoint to it.
      if (Number(position) >= Number(batchLast)) return;
      const stored = new Map<string, Delivery>();
      ids.forEach((id, i) => {
        const json = found[i];
        if (typeof json === 'string') stored.set(id, JSON.parse(json) as Delivery);
      });
      const changed = new Map<string, IndexedDelivery>();
      const applied = new Map<string, AppliedRecord>();
      const deleted = new Set<string>();
      let fannedOutThrough = Number(fanned);
      for (const event of batch) {
        if (event.position <= Number(position)) continue;
        const change = indexChange(event, (id) => changed.get(id)?.delivery ?? stored.get(id));
        if (change.kind === 'subscription_deleted') {
          deleted.add(change.subscriptionId);
          for (const [id, entry] of changed) if (entry.delivery.subscriptionId === change.subscriptionId) changed.delete(id);
          applied.delete(change.subscriptionId);
          continue;
        }
        for (const entry of change.deliveries) changed.set(entry.delivery.id, entry);
        if (change.applied !== null) applied.set(change.applied.subscriptionId, change.applied);
        fannedOutThrough = Math.max(fannedOutThrough, change.fannedOutThrough);
      }
      const args = [epoch as string, position, batchLast, String(fannedOutThrough), writer, String(applied.size), String(deleted.size), String(FORGET_BATCH)];
      for (const record of applied.values()) args.push(record.subscriptionId, `${record.revision} ${record.position} ${record.workspaceId}`);
      args.push(...deleted);
      for (const { delivery, workspaceId } of changed.values()) {
        const was = stored.get(delivery.id)?.status ?? '';
        const attempted = delivery.history.length > 0 ? '1' : '0';
        args.push(delivery.id, delivery.subscriptionId, workspaceId, delivery.status, was, delivery.eventType, String(delivery.eventPosition), String(delivery.createdAt), delivery.replayId ?? '', attempted, JSON.stringify(delivery));
      }
      const outcome = await write(() => client.historyApply(...keys, prefix, ...args));
      if (outcome === 'reset') throw lost();
      if (outcome === 'ok') return void (deleted.size > 0 && forgetMarked());
      // 'moved': another writer applied some of these events meanwhile: read again.
    }
  };

  const enqueue = batchedApplies(BATCH, applyBatch, { weight: (event) => unpackSteps(event).length, lingerMs: options.lingerMs ?? LINGER_MS });

  /**
   * Those of events past the fan-out checkpoint first (few), read with it, then the waiting set a
   * script call of about `pageSize` at a time, each call checking the epoch. A delivery among both is
   * given once; one the scan returns twice (the set rehashed meanwhile) may be given twice: a restart
   * offers what it is given, which is idempotent.
   */
  const pendingPages = async (pageSize: number): Promise<PendingPages> => {
    const bound = epoch;
    if (bound === null) throw reset('not bound to the stored data: read the checkpoint first');
    const indexed = (rows: readonly (string | null)[]): IndexedDelivery[] => {
      const out: IndexedDelivery[] = [];
      for (let i = 0; i < rows.length; i += 3) {
        const [json, workspaceId] = [rows[i + 1], rows[i + 2]];
        if (typeof json === 'string') out.push({ delivery: JSON.parse(json) as Delivery, workspaceId: String(workspaceId) });
      }
      return out;
    };
    const [status, fanned, ...rows] = (await reach(() => client.historyPendingAhead(...keys, prefix, bound))) as [string, string, ...(string | null)[]];
    if (status === 'reset') throw lost();
    const ahead = indexed(rows);
    const aheadIds = new Set(ahead.map(({ delivery }) => delivery.id));
    const deliveries = async function* (): AsyncGenerator<IndexedDelivery> {
      yield* ahead;
      let cursor = '0';
      do {
        const [status, next, ...rows] = (await reach(() => client.historyPendingPage(...keys, prefix, bound, cursor, String(pageSize)))) as [string, string, ...(string | null)[]];
        if (status === 'reset') throw lost();
        for (const waiting of indexed(rows)) if (!aheadIds.has(waiting.delivery.id)) yield waiting;
        cursor = next;
      } while (cursor !== '0');
    };
    return { deliveries: deliveries(), fannedOutThrough: Number(fanned) };
  };

  return {
    async page(query) {
      const { after, createdBefore, createdFrom } = query;
      if (after !== undefined && createdFrom !== undefined && after.createdAt < createdFrom) return { items: [], next: null };
      // The upper bound: the cursor's creation time, where only the ids listed after its own follow, or strictly below createdBefore.
      const fromCursor = after !== undefined && (createdBefore === undefined || after.createdAt < createdBefore);
      const upper = fromCursor ? String(after.createdAt) : createdBefore === undefined ? '+inf' : `(${createdBefore}`;
      const lower = createdFrom === undefined ? '-inf' : String(createdFrom);
      // One more than asked: whether a next page exists, without counting.
      const found = (await reach(() => client.historyPage(...keys, prefix, setOf(query), upper, fromCursor ? after.id : '', lower, String(query.limit + 1)))) as (string | null)[];
      const items = found.flatMap((json) => (json === null ? [] : [JSON.parse(json) as Delivery])).slice(0, query.limit);
      const last = items.at(-1);
      return { items, next: found.length > query.limit && last !== undefined ? { createdAt: last.createdAt, id: last.id } : null };
    },
    async get(subscriptionId, deliveryId) {
      // One transaction: the delivery and the checkpoint it is as recent as.
      const replies = await reach(() => client.multi().hget(keys[0] as string, deliveryId).hget(keys[2] as string, 'position').exec());
      const [[, json], [, position]] = replies as [[unknown, string | null], [unknown, string | null]];
      if (json === null) return undefined;
      const delivery = JSON.parse(json) as Delivery;
      return delivery.subscriptionId === subscriptionId ? { delivery, position: Number(position ?? 0) } : undefined;
    },
    async has(asked) {
      if (asked.length === 0) return [];
      const found = (await reach(() => client.hmget(keys[0] as string, ...asked.map((key) => key.deliveryId)))) as (string | null)[];
      return asked.map(({ subscriptionId }, i) => {
        const json = found[i];
        return typeof json === 'string' && (JSON.parse(json) as Delivery).subscriptionId === subscriptionId;
      });
    },
    async waitingOf(subscriptionId) {
      const [last, ...docs] = (await reach(() => client.historyWaitingOf(...keys, prefix, subscriptionId))) as [string, ...(string | null)[]];
      const deliveries = docs.flatMap((json) => (typeof json === 'string' ? [JSON.parse(json) as Delivery] : []));
      return { ...appliedRecordOf(last), deliveries };
    },
    async replayFirsts(subscriptionId, replayId) {
      const [position, ...docs] = (await reach(() => client.historyReplayFirsts(...keys, prefix, subscriptionId, replayId))) as [string, ...(string | null)[]];
      return { deliveries: docs.flatMap((json) => (typeof json === 'string' ? [JSON.parse(json) as Delivery] : [])), position: Number(position) };
    },
    async appliedOf(subscriptionId) {
      const replies = await reach(() => client.multi().hget(keys[7] as string, subscriptionId).zcard(`${prefix}s:${subscriptionId}:st:waiting`).exec());
      const [[, last], [, waiting]] = replies as [[unknown, string | null], [unknown, number]];
      return { revision: appliedRecordOf(last ?? '').revision, waiting: Number(waiting) };
    },
    async replayOutcomes(subscriptionId, replayId) {
      const replay = `${prefix}r:${subscriptionId}:${replayId}`;
      const names = ['waiting', 'delivered', 'failed', 'cancelled', 'attempted'] as const;
      const replies = await reach(() => names.reduce((multi, name) => multi.scard(name === 'attempted' ? `${replay}:attempted` : `${replay}:st:${name}`), client.multi()).exec());
      const counts = noDeliveries();
      names.forEach((name, i) => (counts[name] = Number((replies as [unknown, number][])[i]?.[1] ?? 0)));
      return counts;
    },
    async checkpoint() {
      // A runner (re)starting waits here for Redis rather than failing.
      await redisReady(client);
      const bound = await bind();
      // What a writer that stopped part way left to drop.
      forgetMarked();
      return bound;
    },
    apply: enqueue,
    pending: async () => pendingWhole(await pendingPages(pendingPage)),
    pendingPages,
    async prune(before, limit) {
      return Number(await reach(() => client.historyPrune(...keys, prefix, String(before), String(limit))));
    },
    forget: (subscriptionId) => reach(() => forgetAll(subscriptionId)),
    async clear() {
      // The epoch goes too, so the other writers reset and read the empty checkpoint.
      await reach(() => unlinkTagged(client, tag));
      await bind();
    },
    async close() {
      closed = true;
      await forgetting;
    },
    lease: async (ms) => Number(await client.historyLeaseTake(leaseKey, writer, String(ms))) === 1,
    async release() {
      await client.historyLeaseRelease(leaseKey, writer);
    },
    appliedThrough: async () => Number((await client.hget(keys[2] as string, 'position')) ?? 0),
  };
};

/** The index on a connection of its own (closed with it). */
export const openRedisDeliveryIndex = (options: { readonly url: string } & Omit<RedisDeliveryIndexOptions, 'client'>): DeliveryIndex & WriterLease & { readonly client: Redis } => {
  const { url, ...rest } = options;
  const client = createRedisClient(url, 'command', { commandTimeoutMs: READ_MODEL_COMMAND_TIMEOUT_MS });
  const index = createRedisDeliveryIndex({ client, ...rest });
  return {
    ...index,
    client,
    async close() {
      await index.close();
      client.disconnect();
    },
  };
};
