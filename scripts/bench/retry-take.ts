// Retry schedule take benchmark: what one take from the shared Redis schedule costs a dispatcher, in
// round trips. `npm run bench -- retry-take`.
//
// A private Redis (scripts/redis.sh on the bench's own port) holds 4,000 due attempts over 50
// subscriptions (one in twenty a retry); takes of up to 16 entries, 4 per subscription, empty it, five
// times over. Each round trip of a take waits for a turn of the event loop, so the figures are taken
// twice: with an idle loop, and with one kept busy by 2 ms tasks back to back, as a loaded
// dispatcher's is. The ceiling beside each take is one bare PING in the same loop: a take's p50 over
// the PING's is how many round trips' worth it costs. Beside the take, a fill's: a pump's fill takes
// and then needs the next due time for its timer, asked apart after the take (nextDueAt) or told by
// the take itself (its `look`); the takes alternate between the two ways.
import { Redis } from 'ioredis';
import { createRedisRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/redis.js';
import { engine as engines } from './engines.js';
import { percentile, round } from './fanout.js';

const REDIS_PORT = 6399;
const URL = `redis://127.0.0.1:${REDIS_PORT}`;
const engine = engines({ kafka: 0, redis: REDIS_PORT });
const ROUNDS = 5;
const ENTRIES = 4_000;
const SUBSCRIPTIONS = 50;
const BUSY_TASK_MS = 2;

/** Runs `measure` with the event loop kept busy by back-to-back tasks of BUSY_TASK_MS, or idle. */
const inLoop = async <T>(busy: boolean, measure: () => Promise<T>): Promise<T> => {
  const ticker = busy
    ? setInterval(() => {
        const end = performance.now() + BUSY_TASK_MS;
        while (performance.now() < end);
      }, 0)
    : null;
  try {
    return await measure();
  } finally {
    if (ticker !== null) clearInterval(ticker);
  }
};

const p50 = (samples: number[]): number => percentile([...samples].sort((a, b) => a - b), 50);

const pings = async (client: Redis, n: number): Promise<number> => {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await client.ping();
    times.push(performance.now() - started);
  }
  return p50(times);
};

const takes = async (): Promise<{ p50: number; count: number; fillApart: number; fillLook: number }> => {
  const schedule = createRedisRetrySchedule({ url: URL, leaseMs: 60_000, keyPrefix: `bench-${Date.now()}:` });
  await schedule.ready();
  const times: number[] = [];
  const fills = { apart: [] as number[], look: [] as number[] };
  try {
    for (let r = 0; r < ROUNDS; r++) {
      for (let i = 0; i < ENTRIES; i++) {
        await schedule.put({ deliveryId: `r${r}d${i}`, subscriptionId: `s${i % SUBSCRIPTIONS}`, dueAt: i, round: 1, ...(i % 20 === 0 ? { retry: true } : {}) });
      }
      for (let n = 0; ; n++) {
        const started = performance.now();
        const look = n % 2 === 1;
        const taken = await schedule.takeDue(Number.MAX_SAFE_INTEGER, 16, () => 4, undefined, look ? () => undefined : undefined);
        if (look) fills.look.push(performance.now() - started);
        else {
          times.push(performance.now() - started);
          await schedule.nextDueAt();
          fills.apart.push(performance.now() - started);
        }
        if (taken.length === 0) break;
        for (const entry of taken) await schedule.remove(entry.deliveryId);
      }
    }
  } finally {
    await schedule.close();
  }
  return { p50: p50(times), count: times.length, fillApart: p50(fills.apart), fillLook: p50(fills.look) };
};

export async function run(): Promise<Record<string, number | string>> {
  await engine('redis', 'start');
  const client = new Redis(URL);
  try {
    const figures: Record<string, number | string> = { bench: 'retry-take' };
    for (const busy of [false, true]) {
      const loop = busy ? 'busy' : 'idle';
      const ping = await inLoop(busy, () => pings(client, 1_000));
      const take = await inLoop(busy, takes);
      console.log(`${loop} loop: take p50 ${take.p50.toFixed(3)} ms over ${take.count} takes; PING p50 ${ping.toFixed(3)} ms (ceiling); ${(take.p50 / ping).toFixed(1)} round trips' worth`);
      console.log(`${loop} loop: a fill (take, next due time) p50 ${take.fillApart.toFixed(3)} ms asked apart, ${take.fillLook.toFixed(3)} ms told by the take; ${(take.fillApart / ping).toFixed(1)} and ${(take.fillLook / ping).toFixed(1)} round trips' worth`);
      Object.assign(figures, {
        [`take_p50_ms_${loop}`]: round(take.p50, 3),
        [`ping_p50_ms_${loop}`]: round(ping, 3),
        [`take_round_trips_${loop}`]: round(take.p50 / ping, 1),
        [`fill_p50_ms_${loop}_apart`]: round(take.fillApart, 3),
        [`fill_p50_ms_${loop}_told`]: round(take.fillLook, 3),
      });
    }
    return figures;
  } finally {
    client.disconnect();
    await engine('redis', 'stop');
  }
}
