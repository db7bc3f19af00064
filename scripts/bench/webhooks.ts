// Webhook delivery benchmark: the real service on its SQLite log fans 10,000 events out to 10
// subscriptions on one local receiver (100,000 deliveries, every attempt recorded as an event), beside
// a bare undici POST loop to the same receiver in the same process (the ceiling); the phases are
// fanout.ts's (burst throughput, then paced latency from append to the first attempt received).
// `npm run bench -- webhooks [--long]` (--long: 50,000 events in the burst).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Agent, request } from 'undici';
import { loadConfig } from '../../src/config/config.js';
import { randomId } from '../../src/shared/ids.js';
import { startService } from '../../src/service.js';
import { ADMIN, measureFanout, PACED_DELIVERIES_PER_S, round, startArrivals, subscribeReceiver } from './fanout.js';

/** The ceiling: the same number of POSTs of an envelope-sized body, as many in flight as the dispatcher allows. */
const bareLoop = async (url: string, total: number, concurrency: number): Promise<number> => {
  const agent = new Agent({ keepAliveTimeout: 60_000 });
  const body = Buffer.from(JSON.stringify({ id: randomId(), type: 'ticket.updated', timestamp: new Date().toISOString(), workspace_id: randomId(), data: { ticket_id: randomId() }, _links: {} }));
  let sent = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (sent < total) {
        sent++;
        const res = await request(url, { dispatcher: agent, method: 'POST', body, headers: { 'content-type': 'application/json', 'x-webhook-id': 'bare', 'x-webhook-attempt': '0' } });
        await res.body.dump();
      }
    }),
  );
  const perS = total / ((performance.now() - started) / 1000);
  await agent.close();
  return perS;
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const events = opts.long ? 50_000 : 10_000;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-webhooks-'));
  const receiver = await startArrivals();
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN, WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8' });
  const service = await startService(config);
  try {
    const setup = await subscribeReceiver(service.url, receiver.url);
    const fanout = await measureFanout({ ...setup, events, receiver, append: (stream, batch) => service.core.log.append(stream, batch, 'no_stream') });
    const ceiling = await bareLoop(receiver.url, fanout.deliveries, config.webhooks.maxInFlight);
    return {
      bench: 'webhooks',
      deliveries_per_s: Math.round(fanout.deliveriesPerS),
      p99_ms: round(fanout.paced.p99),
      p50_ms: round(fanout.paced.p50),
      paced_deliveries_per_s: PACED_DELIVERIES_PER_S,
      burst_p99_ms: round(fanout.burst.p99),
      ceiling_per_s: Math.round(ceiling),
      share_of_ceiling: round(fanout.deliveriesPerS / ceiling, 2),
      deliveries: fanout.deliveries,
    };
  } finally {
    await service.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
