// History replay benchmark: the real embedded service fans a history of events out to 10
// subscriptions on one local receiver (fanout.ts's burst: the plain delivery rate, the ceiling here,
// then its paced phase: live latency with nothing else going on). Then every subscription replays
// that whole history while live events keep arriving (LIVE_EVENTS_PER_S, to all 10): the replay rate
// (replayed deliveries/s, from the requests until every replay completed and was delivered) beside
// the ceiling, and the live deliveries' latency (append → first attempt received) during the replay
// beside the one without it. `npm run bench -- replay [--long]` (--long: 10,000 events of history).
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
    const append = (stream: string, batch: Parameters<typeof service.core.log.append>[1]) => service.core.log.append(stream, batch, 'any');
    const fanout = await measureFanout({ ...setup, events, receiver, append });
    // The history: the burst's and the paced phase's deliveries; every subscription replays all of it.
    const replayed = (await receiver.arrivals()).size;

    // Live events all along the replay, one small batch every 10 ms.
    const live: { id: string; at: number }[] = [];
    let replaying = true;
    const liveLoop = (async () => {
      while (replaying) {
        const batch = Array.from({ length: LIVE_EVENTS_PER_S / 100 }, () => ({ id: randomId(), type: 'ticket.updated', workspaceId, data: { ticket_id: randomId() } }));
        const at = nowMs();
        batch.forEach((e) => live.push({ id: e.id, at }));
        await append(`bench-live-${randomId()}`, batch);
        await sleep(10);
      }
    })();

    const started = nowMs();
    const replays = await Promise.all(subscriptionIds.map(async (id) => ({ id, replay: String((await api(`${service.url}/api/v1/webhooks/${id}/replay`, apiKey, 'POST', { since: 0 }))['id']) })));
    for (;;) {
      const progress = await Promise.all(replays.map(({ id, replay }) => api(`${service.url}/api/v1/webhooks/${id}/replays/${replay}`, apiKey, 'GET')));
      if (progress.every((p) => p['status'] === 'completed' && p['delivered'] === p['matched'])) break;
      // As a client following its replays would: the rate's resolution is this pause.
      await sleep(250);
    }
    const seconds = (nowMs() - started) / 1000;
    replaying = false;
    await liveLoop;
    await receiver.until(2 * replayed + live.length * subscriptionIds.length);
    const arrivals = await receiver.arrivals();
    const latencies = live.flatMap(({ id, at }) => subscriptionIds.map((s) => (arrivals.get(deliveryIdOf(id, s)) ?? NaN) - at)).sort((a, b) => a - b);
    return {
      bench: 'replay',
      replayed_deliveries: replayed,
      replay_deliveries_per_s: Math.round(replayed / seconds),
      ceiling_fanout_deliveries_per_s: Math.round(fanout.deliveriesPerS),
      share_of_ceiling: round(replayed / seconds / fanout.deliveriesPerS, 2),
      live_deliveries_during_replay: live.length * subscriptionIds.length,
      live_p50_ms_during_replay: round(percentile(latencies, 50)),
      live_p99_ms_during_replay: round(percentile(latencies, 99)),
      live_p50_ms_alone: round(fanout.paced.p50),
      live_p99_ms_alone: round(fanout.paced.p99),
    };
  } finally {
    await service.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
