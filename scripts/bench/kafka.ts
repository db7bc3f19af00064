// Webhook fan-out through Kafka: 10,000 events × 10 subscriptions (100,000 deliveries) to one local
// receiver, relayed log → Kafka by one relay process and delivered by two dispatcher processes (a
// consumer group), all on one shared SQLite log; the phases are fanout.ts's (burst throughput, then
// paced latency from append to the first attempt received). Starts and stops its own Kafka and Redis
// (scripts/kafka.sh, scripts/redis.sh on private ports) and runs the embedded webhooks benchmark in
// the same run for comparison. `npm run bench -- kafka [--long]` (--long: 50,000 events).
// Run as `tsx scripts/bench/kafka.ts <role>` it is one role process of the benchmark.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Core, Feature } from '../../src/app/core.js';
import { backgroundCore } from '../../src/app/log-core.js';
import { openRoleLog } from '../../src/bus/role-log.js';
import { roleFeatures } from '../../src/bus/roles.js';
import { loadConfig, type Config } from '../../src/config/config.js';
import { systemMicros } from '../../src/log/clock.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { startService } from '../../src/service.js';
import { ADMIN, measureFanout, PACED_DELIVERIES_PER_S, round, startArrivals, subscribeReceiver, type Arrivals, type FanoutSetup } from './fanout.js';
import { engine as engines } from './engines.js';
import { run as runEmbedded } from './webhooks.js';

const KAFKA_PORT = 19392;
const REDIS_PORT = 6393;
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const engine = engines({ kafka: KAFKA_PORT, redis: REDIS_PORT });

/** The parts of Core the relay and dispatcher roles use, composed as the service does. */
const roleCore = async (config: Config): Promise<Core> => backgroundCore(config, await openRoleLog(config, systemMicros), systemMicros);

/** One role process: starts the role's features, says "ready", stops on SIGTERM. */
const roleProcess = async (): Promise<void> => {
  const core = await roleCore(loadConfig());
  const features: Feature[] = roleFeatures(core, []);
  for (const feature of features) await feature.start?.();
  process.stdout.write('ready\n');
  process.once('SIGTERM', () => {
    void (async () => {
      for (const feature of [...features].reverse()) await feature.stop?.();
      await core.log.close();
      process.exit(0);
    })();
  });
};

const startRole = (role: string, env: Record<string, string>): Promise<ChildProcess> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), role], { cwd: ROOT, env: { ...process.env, ...env, ROLE: role }, stdio: ['ignore', 'pipe', 'inherit'] });
    child.stdout?.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`${role} exited with ${code}`)));
  });

const stopRole = (child: ChildProcess): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });

/** The workspace and subscriptions, through the API of a short-lived embedded service (before any event). */
const setUp = async (dataDir: string, receiver: Arrivals): Promise<FanoutSetup> => {
  const service = await startService(loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ADMIN_TOKEN: ADMIN }));
  try {
    return await subscribeReceiver(service.url, receiver.url);
  } finally {
    await service.close();
  }
};

const throughKafka = async (events: number) => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'bench-kafka-'));
  const receiver = await startArrivals();
  const roles: ChildProcess[] = [];
  const setup = await setUp(dataDir, receiver);
  const log = openSqliteLog({ file: path.join(dataDir, 'events.sqlite'), shared: true });
  try {
    const env = {
      DATA_DIR: dataDir,
      PORT: '0',
      KAFKA_BROKERS: `127.0.0.1:${KAFKA_PORT}`,
      KAFKA_TOPIC: `bench-${randomId().slice(0, 8)}`,
      REDIS_URL: `redis://127.0.0.1:${REDIS_PORT}`,
      WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    };
    roles.push(await startRole('relay', env));
    roles.push(...(await Promise.all([startRole('dispatcher', env), startRole('dispatcher', env)])));
    return await measureFanout({ ...setup, events, receiver, append: (stream, batch) => log.append(stream, batch, 'no_stream') });
  } finally {
    for (const role of roles) await stopRole(role);
    await log.close();
    await receiver.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};

export async function run(opts: { long: boolean }): Promise<Record<string, number | string>> {
  const events = opts.long ? 50_000 : 10_000;
  await engine('kafka', 'start');
  await engine('redis', 'start');
  try {
    const kafka = await throughKafka(events);
    const embedded = await runEmbedded(opts);
    return {
      bench: 'kafka',
      deliveries_per_s: Math.round(kafka.deliveriesPerS),
      p99_ms: round(kafka.paced.p99),
      p50_ms: round(kafka.paced.p50),
      paced_deliveries_per_s: PACED_DELIVERIES_PER_S,
      deliveries: kafka.deliveries,
      embedded_deliveries_per_s: Number(embedded['deliveries_per_s']),
      embedded_p99_ms: Number(embedded['p99_ms']),
    };
  } finally {
    await engine('redis', 'stop');
    await engine('kafka', 'stop');
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] !== undefined) await roleProcess();
