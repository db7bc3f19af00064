// Webhook fan-out through Kafka: 10,000 events × 10 subscriptions (100,000 deliveries) to one local
// receiver, relayed log → Kafka by one relay process and delivered by two dispatcher processes (a
// consumer group), all on one shared SQLite log; the phases are fanout.ts's (burst throughput, then
// paced latency from append to the first attempt received). Starts and stops its own Kafka and Redis
// (scripts/kafka.sh, scripts/redis.sh on private ports) and runs the embedded webhooks benchmark in
// the same run for comparison. `npm run bench -- kafka [--long]` (--long: 50,000 events).
// Beside the rates, what a delivery costs the roles, steadier than a rate on a shared machine: the
// dispatchers' and the relay's CPU (each process's own, from ready to stop), the CPU of the Kafka
// broker and of Redis over the same deliveries, and the commands and bytes Redis received, each per
// delivery of the run.
// Run as `tsx scripts/bench/kafka.ts <role>` it is one role process of the benchmark.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
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
import { statCpu } from './stall-watch.js';

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
  const ready = process.cpuUsage();
  process.once('SIGTERM', () => {
    const { user, system } = process.cpuUsage(ready);
    process.stdout.write(`cpu ${user + system}\n`);
    void (async () => {
      for (const feature of [...features].reverse()) await feature.stop?.();
      await core.log.close();
      process.exit(0);
    })();
  });
};

interface Role {
  readonly name: string;
  readonly child: ChildProcess;
  /** Its CPU µs from ready to stop, once it said it at SIGTERM. */
  cpuMicros: number | null;
}

const startRole = (name: string, env: Record<string, string>): Promise<Role> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), name], { cwd: ROOT, env: { ...process.env, ...env, ROLE: name }, stdio: ['ignore', 'pipe', 'inherit'] });
    const role: Role = { name, child, cpuMicros: null };
    child.stdout?.on('data', (chunk: Buffer) => {
      const text = chunk.toString();
      if (text.includes('ready')) resolve(role);
      const cpu = /^cpu (\d+)$/m.exec(text);
      if (cpu !== null) role.cpuMicros = Number(cpu[1]);
    });
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code}`)));
  });

const stopRole = ({ child }: Role): Promise<void> =>
  new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.removeAllListeners('exit');
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  });

interface RedisReceived {
  readonly commands: number;
  readonly bytes: number;
  /** Calls of each command, those that scripts make included. */
  readonly calls: ReadonlyMap<string, number>;
}

/** Redis' counters of what it received: commands processed, bytes in, and calls of each command; and its CPU µs so far. */
const redisReceived = async (): Promise<RedisReceived & { readonly cpuMicros: number }> => {
  const client = new Redis(`redis://127.0.0.1:${REDIS_PORT}`);
  try {
    const stats = await client.info('stats');
    const field = (name: string): number => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(stats)?.[1] ?? NaN);
    const calls = new Map([...(await client.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [String(m[1]), Number(m[2])]));
    const cpu = await client.info('cpu');
    const seconds = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
    return { commands: field('total_commands_processed'), bytes: field('total_net_input_bytes'), calls, cpuMicros: (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1e6 };
  } finally {
    client.disconnect();
  }
};

/** The Kafka broker's CPU µs so far (user and system), from /proc by the pid scripts/kafka.sh keeps. */
const brokerCpuMicros = (): number => {
  const pid = readFileSync(path.join(ROOT, '.cache', 'run', `kafka-${KAFKA_PORT}`, 'kafka.pid'), 'utf8').trim();
  const cpu = statCpu(`/proc/${pid}/stat`);
  if (cpu === null) throw new Error(`the Kafka broker (pid ${pid}) is not running`);
  return cpu.cpuS * 1e6;
};

/** The role processes' CPU µs of each name, added up. */
const cpuOf = (roles: readonly Role[], name: string): number => roles.filter((role) => role.name === name).reduce((sum, role) => sum + (role.cpuMicros ?? NaN), 0);

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
  const roles: Role[] = [];
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
    const before = await redisReceived();
    const brokerBefore = brokerCpuMicros();
    const figures = await measureFanout({ ...setup, events, receiver, append: (stream, batch) => log.append(stream, batch, 'no_stream') });
    const brokerAfter = brokerCpuMicros();
    const after = await redisReceived();
    // Stopped here so each says its CPU; the stop in `finally` then finds them gone.
    await Promise.all(roles.map(stopRole));
    const perDelivery = (n: number): number => round(n / figures.total);
    return {
      ...figures,
      dispatcherCpuMicros: perDelivery(cpuOf(roles, 'dispatcher')),
      relayCpuMicros: perDelivery(cpuOf(roles, 'relay')),
      brokerCpuMicros: perDelivery(brokerAfter - brokerBefore),
      redisCpuMicros: perDelivery(after.cpuMicros - before.cpuMicros),
      redisCommands: perDelivery(after.commands - before.commands),
      redisBytes: perDelivery(after.bytes - before.bytes),
      // The five commands called most, a delivery's share of each.
      redisTop: [...after.calls]
        .map(([name, calls]) => [name, calls - (before.calls.get(name) ?? 0)] as const)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 5)
        .map(([name, calls]) => `${name} ${perDelivery(calls)}`)
        .join(', '),
    };
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
    console.log(
      `kafka, per delivery (${kafka.total.toLocaleString('en')}): the two dispatchers ${kafka.dispatcherCpuMicros} CPU µs, the relay ${kafka.relayCpuMicros}, the Kafka broker ${kafka.brokerCpuMicros}, Redis ${kafka.redisCpuMicros}; ` +
        `Redis received ${kafka.redisCommands} commands (${kafka.redisTop}), ${kafka.redisBytes} bytes`,
    );
    const embedded = await runEmbedded(opts);
    return {
      bench: 'kafka',
      deliveries_per_s: Math.round(kafka.deliveriesPerS),
      p99_ms: round(kafka.paced.p99),
      p50_ms: round(kafka.paced.p50),
      paced_deliveries_per_s: PACED_DELIVERIES_PER_S,
      deliveries: kafka.deliveries,
      dispatcher_cpu_us_per_delivery: kafka.dispatcherCpuMicros,
      relay_cpu_us_per_delivery: kafka.relayCpuMicros,
      broker_cpu_us_per_delivery: kafka.brokerCpuMicros,
      redis_cpu_us_per_delivery: kafka.redisCpuMicros,
      redis_commands_per_delivery: kafka.redisCommands,
      redis_bytes_in_per_delivery: kafka.redisBytes,
      embedded_deliveries_per_s: Number(embedded['deliveries_per_s']),
      embedded_p99_ms: Number(embedded['p99_ms']),
    };
  } finally {
    await engine('redis', 'stop');
    await engine('kafka', 'stop');
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] !== undefined) await roleProcess();
