// History replay benchmark: the real embedded service fans a history of events out to 10
// subscriptions on one local receiver (fanout.ts's burst: the plain delivery rate, the ceiling here,
// then its paced phase: live latency with nothing else going on). Then every subscription replays
// that whole history while live events keep arriving (LIVE_EVENTS_PER_S, to all 10): the replay rate
// (replayed deliveries/s, from the requests until every replay completed and was delivered) beside
// the ceiling, and the live deliveries' latency (append → first attempt received) during the replay
// beside the same live rate alone (LIVE_ALONE_MS before the replay). `npm run bench -- replay [--long]` (--long: 10,000 events of history).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { deliveryIdOf } from '../../src/domain/delivery/ids.js';
import { randomId } from '../../src/shared/ids.js';
import { startService } from '../../src/service.js';
import { ADMIN, measureFanout, nowMs, percentile, round, sleep, startArrivals, subscribeReceiver } from './fanout.js';

const LIVE_EVENTS_PER_S = 100;
const LIVE_ALONE_MS = 10_000;

const api = async (url: string, apiKey: string, method: 'GET' | 'POST', body?: unknown): Promise<Record<string, unknown>> => {
  const res = await request(url, { method, headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const answer = (await res.body.json()) as Record<string, unknown>;
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${JSON.stringify(answer)}`);
  return answer;
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const events = opts.long ? 10_000 : 2_000;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-replay-'));
  const receiver = await startArrivals();
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
  const service = await startService(config);
  try {
    const setup = await subscribeReceiver(service.url, receiver.url);
    const { workspaceId, apiKey, subscriptionIds } = setup;
    let lastOffset = 0;
    const append = async (stream: string, batch: Parameters<typeof service.core.log.append>[1]) => {
      const appended = await service.core.log.append(stream, batch, 'any');
      for (const record of appended.records) lastOffset = Math.max(lastOffset, record.offset ?? 0);
      return appended;
    };
    const fanout = await measureFanout({ ...setup, events, receiver, append });

    /** Live events, one small batch every 10 ms, until `stop` resolves; then their append → first attempt latencies once all arrived. */
    const liveWhile = async (stop: Promise<void>, expectedBefore: number) => {
      const live: { id: string; at: number }[] = [];
      let running = true;
      void stop.then(() => (running = false));
      while (running) {
        const batch = Array.from({ length: LIVE_EVENTS_PER_S / 100 }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } }));
        const at = nowMs();
        batch.forEach((e) => live.push({ id: e.id, at }));
        await append(`bench-live-${randomId()}`, batch);
        await sleep(10);
      }
      await receiver.until(expectedBefore + live.length * subscriptionIds.length);
      const arrivals = await receiver.arrivals();
      const latencies = live.flatMap(({ id, at }) => subscriptionIds.map((s) => (arrivals.get(deliveryIdOf(id, s)) ?? NaN) - at)).sort((a, b) => a - b);
      return { deliveries: live.length * subscriptionIds.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
    };

    // The history: the burst's and the paced phase's deliveries; every subscription replays all of it.
    const history = (await receiver.arrivals()).size;
    const historyEnd = lastOffset;
    // The live rate alone, for the latency without a replay.
    const alone = await liveWhile(sleep(LIVE_ALONE_MS).then(() => undefined), history);
    // The replay: every subscription sends the history again (not the live phase's events).
    const replayed = history;
    const delivered = history + alone.deliveries;
    let replayTime = 0;
    const replaying = (async () => {
      const started = nowMs();
      const replays = await Promise.all(
        subscriptionIds.map(async (id) => ({ id, replay: String((await api(`${service.url}/api/v1/webhooks/${id}/replay`, apiKey, 'POST', { since: 0, until: historyEnd }))['id']) })),
      );
      for (;;) {
        const progress = await Promise.all(replays.map(({ id, replay }) => api(`${service.url}/api/v1/webhooks/${id}/replays/${replay}`, apiKey, 'GET')));
        if (progress.every((p) => p['status'] === 'completed' && p['delivered'] === p['matched'])) break;
        // As a client following its replays would: the rate's resolution is this pause.
        await sleep(250);
      }
      replayTime = (nowMs() - started) / 1000;
    })();
    const during = await liveWhile(replaying, delivered + replayed);
    return {
      bench: 'replay',
      replayed_deliveries: replayed,
      replay_deliveries_per_s: Math.round(replayed / replayTime),
      ceiling_fanout_deliveries_per_s: Math.round(fanout.deliveriesPerS),
      share_of_ceiling: round(replayed / replayTime / fanout.deliveriesPerS, 2),
      live_deliveries_per_s: LIVE_EVENTS_PER_S * subscriptionIds.length,
      live_deliveries_during_replay: during.deliveries,
      live_p50_ms_during_replay: round(during.p50),
      live_p99_ms_during_replay: round(during.p99),
      live_p50_ms_alone: round(alone.p50),
      live_p99_ms_alone: round(alone.p99),
    };
  } finally {
    await service.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
