// Replays at a long replay history: BENCH_REPLAYS (200) finished replays of one subscription with
// BENCH_PROGRESS (720) progress records each (twelve minutes of a driver's records, one a second),
// recorded straight into the log as drivers record them, and 3,000 public events (`--long`: 10,000)
// to replay; then the embedded service, in its own process, started on that log. Reported: that
// start; GET of one of the old replays beside the same on a subscription with no replay history
// (the ceiling), with an unrelated request timed between them; then, while tickets are written at
// 20/s, a replay of the events on the subscription with no history (the ceiling) and then on the one
// with the long history, each followed to `completed`, with the live deliveries' commit → receipt lag
// meanwhile (the driver records its progress once a second) beside before them.
// `npm run bench -- replay-history [--long]`.
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { REPLAY_EVENTS, replayEventId, replayStream } from '../../src/domain/replay/replay.js';
import type { Decided } from '../../src/domain/aggregate.js';
import type { JsonObject, NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { inBenchCluster, must, ticketWriter, timedStart, type BenchReceiver } from './deliveries-history.js';
import { quantiles } from './quantiles.js';

const ADMIN = 'bench-admin';
const GETS = 100;

/** `count` finished replays of the subscription, `progress` records each, and `events` public events, appended to the log: an old replay's id, and the last event's offset. */
const recordHistory = async (file: string, workspaceId: string, subscriptionId: string, count: number, progress: number, events: number): Promise<{ old: string; until: number }> => {
  const log = openSqliteLog({ file, shared: true });
  const through = await log.headPosition();
  const at = Date.now() * 1000;
  let first = '';
  for (let r = 0; r < count; r++) {
    const replayId = randomId();
    first ||= replayId;
    const step = (type: string, data: JsonObject): NewEvent => {
      const decided: Decided = { type, data: { replay_id: replayId, ...data } };
      return { id: replayEventId(decided), type, workspaceId, data: decided.data };
    };
    const steps: NewEvent[] = [
      step(REPLAY_EVENTS.requested, { subscription_id: subscriptionId, since: 0, until: null, through_position: through, types: [], only_failed: false, requested_at: at }),
      ...Array.from({ length: progress }, (_, p) => step(REPLAY_EVENTS.progressed, { cursor: p + 1, matched: p + 1 })),
      step(REPLAY_EVENTS.completed, { completed_at: at }),
    ];
    for (let i = 0; i < steps.length; i += 500) await log.append(replayStream(replayId), steps.slice(i, i + 500), 'any');
  }
  let until = 0;
  for (let n = 0; n < events; n += 500) {
    const batch = Array.from({ length: Math.min(500, events - n) }, (): NewEvent => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } }));
    until = (await log.append(`bench-replayed-${n}`, batch, 'any')).records.at(-1)?.offset ?? until;
  }
  await log.close();
  return { old: first, until };
};

/** ms of each of `count` GETs of `p`, with an unrelated request (the webhook list) timed after each. */
const timedGets = async (url: string, key: string, p: string, count: number): Promise<{ gets: number[]; unrelated: number[] }> => {
  const gets: number[] = [];
  const unrelated: number[] = [];
  for (let i = 0; i < count; i++) {
    let began = performance.now();
    await must(url, 'GET', p, key);
    gets.push(performance.now() - began);
    began = performance.now();
    await must(url, 'GET', '/api/v1/webhooks', key);
    unrelated.push(performance.now() - began);
  }
  return { gets, unrelated };
};

/** Commit → receipt lag of the live deliveries (committed from `from` on) received in [from, to). */
const liveLag = (receiver: BenchReceiver, from: number, to: number) =>
  quantiles(receiver.arrivals.filter(({ at, lagMs }) => at >= from && at < to && at - lagMs >= from).map(({ lagMs }) => lagMs));

export const run = async ({ long }: { long: boolean }) => {
  const replays = Number(process.env['BENCH_REPLAYS'] ?? 200);
  const progress = Number(process.env['BENCH_PROGRESS'] ?? 720);
  const events = long ? 10_000 : 3_000;
  return inBenchCluster({ ROLE: 'all' }, async ({ dataDir, receiver, group }) => {
    const prepare = await group.start('prepare', {});
    const workspace = await must(prepare.url, 'POST', '/admin/v1/workspaces', ADMIN, { name: 'bench', plan: 'bench' });
    const key = String(workspace['api_key']);
    const big = String((await must(prepare.url, 'POST', '/api/v1/webhooks', key, { url: `${receiver.url}/big` }))['id']);
    const small = String((await must(prepare.url, 'POST', '/api/v1/webhooks', key, { url: `${receiver.url}/small` }))['id']);
    prepare.kill('SIGTERM');
    await prepare.exited;
    console.error(`recording ${replays} replays of ${progress} progress records each, and ${events} events`);
    const { old, until } = await recordHistory(path.join(dataDir, 'events.sqlite'), String(workspace['workspace_id']), big, replays, progress, events);
    const { service, ms: startMs } = await timedStart(() => group.start('service', {}));
    const url = service.url;

    /** Requests a replay of the recorded events (not the tickets written since) and follows it to `completed` (polled every 20 ms); ms. */
    const replayAll = async (subscription: string): Promise<{ id: string; ms: number }> => {
      const began = performance.now();
      const id = String((await must(url, 'POST', `/api/v1/webhooks/${subscription}/replay`, key, { since: 0, until }))['id']);
      while ((await must(url, 'GET', `/api/v1/webhooks/${subscription}/replays/${id}`, key))['status'] === 'running') await sleep(20);
      return { id, ms: Math.round(performance.now() - began) };
    };

    const writer = ticketWriter(url, key, 'h');
    try {
      // The events recorded while the service was down are fanned out live at its start: first that.
      while (receiver.arrivals.length < 2 * events) await sleep(50);
      const aloneFrom = Date.now();
      await sleep(5_000);
      const aloneTo = Date.now();
      const ceiling = await replayAll(small);
      const ceilingTo = Date.now();
      const longHistory = await replayAll(big);
      const during = liveLag(receiver, ceilingTo, Date.now());
      await writer.stop();
      const oldGets = await timedGets(url, key, `/api/v1/webhooks/${big}/replays/${old}`, GETS);
      const ceilingGets = await timedGets(url, key, `/api/v1/webhooks/${small}/replays/${ceiling.id}`, GETS);
      const figures = {
        alone: liveLag(receiver, aloneFrom, aloneTo),
        duringCeiling: liveLag(receiver, aloneTo, ceilingTo),
        during,
        get: quantiles(oldGets.gets),
        getCeiling: quantiles(ceilingGets.gets),
        unrelated: quantiles([...oldGets.unrelated, ...ceilingGets.unrelated]),
      };
      console.error(`start over ${replays} replays × ${progress} progress records: ${startMs} ms`);
      console.error(`GET of an old replay: p50 ${figures.get.p50} ms, p99 ${figures.get.p99} ms; of a replay with no history beside it (the ceiling): p50 ${figures.getCeiling.p50} ms, p99 ${figures.getCeiling.p99} ms; unrelated request between: p99 ${figures.unrelated.p99} ms`);
      console.error(`a replay of ${events} events: ${longHistory.ms} ms with the long history, ${ceiling.ms} ms without (the ceiling)`);
      console.error(`live commit → receipt: p99 ${figures.during.p99} ms, max ${figures.during.max} ms during the replay with the long history; p99 ${figures.duringCeiling.p99}, max ${figures.duringCeiling.max} during the other; p99 ${figures.alone.p99}, max ${figures.alone.max} before`);
      return {
        bench: 'replay-history',
        replays,
        progress_records_each: progress,
        events_replayed: events,
        startup_ms: startMs,
        get_old_replay_p50_ms: figures.get.p50,
        get_old_replay_p99_ms: figures.get.p99,
        ceiling_get_p50_ms: figures.getCeiling.p50,
        ceiling_get_p99_ms: figures.getCeiling.p99,
        unrelated_request_p99_ms: figures.unrelated.p99,
        replay_ms: longHistory.ms,
        ceiling_replay_ms: ceiling.ms,
        live_during_replay_p99_ms: figures.during.p99,
        live_during_replay_max_ms: figures.during.max,
        live_during_ceiling_replay_p99_ms: figures.duringCeiling.p99,
        live_alone_p99_ms: figures.alone.p99,
        live_alone_max_ms: figures.alone.max,
      };
    } finally {
      await writer.stop();
    }
  });
};
