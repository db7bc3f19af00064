// The distributed mode under torture: the relay, two API servers and two dispatchers (ROLE relay, api,
// dispatcher) over one shared SQLite data folder, with a Kafka and a Redis of their own that this file
// starts, crashes and restarts: a broker of scripts/kafka.sh on free ports (its `restart` is kill -9 of
// the JVM and a new one on the same storage) and a private redis-server without persistence (it comes
// back empty). Each crash takes one target in rotation: an API server, the relay, a dispatcher (one of
// the two at random, kill -9 and a new process), Kafka (kill -9 or a clean stop, at random: a clean stop
// closes its clients' connections, which kafkajs takes differently) or Redis. Clients spread their requests over the
// API servers that are up: `url` names the next one at each call.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { promisify } from 'node:util';
import { clusterEnv, createProcessGroup, type RoleProcess } from '../../test/support/processes.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from '../../test/support/redis-server.js';
import type { Random } from './random.js';
import { RECOVERY_TIMEOUT_MS, SERVICE_ENV, startReady, until, type ServiceUnderTest } from './service.js';

const run = promisify(execFile);

export const TARGETS = ['api', 'relay', 'dispatcher', 'kafka', 'redis'] as const;
export type Target = (typeof TARGETS)[number];

/** Redis stays down this long (a random share of it) before it starts again, empty. */
const REDIS_DOWN_MS = 2000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const isFree = async (port: number): Promise<boolean> => {
  const server = createServer();
  const listening = once(server, 'listening').then(() => true, () => false);
  server.once('error', () => undefined);
  server.listen(port, '127.0.0.1');
  const free = await listening;
  if (free) server.close();
  return free;
};

/** A free loopback port whose successor is free too (the broker's controller listens there). */
const freePortPair = async (): Promise<number> => {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if ((await isFree(port)) && (await isFree(port + 1))) return port;
  }
};

/** A broker of scripts/kafka.sh on its own port and storage (.cache/run/kafka-<port>/). */
const privateKafka = (port: number) => {
  const kafkaSh = (command: 'start' | 'stop' | 'restart') => run('bash', ['scripts/kafka.sh', command], { env: { ...process.env, KAFKA_PORT: String(port) } });
  return {
    brokers: `127.0.0.1:${port}`,
    start: () => kafkaSh('start'),
    stop: () => kafkaSh('stop'),
    /** kill -9 of the JVM, or its clean stop (SIGTERM: it closes its connections), and waits until it is gone (its storage stays). */
    async crash(signal: 'SIGKILL' | 'SIGTERM') {
      const pid = Number(readFileSync(`.cache/run/kafka-${port}/kafka.pid`, 'utf8'));
      process.kill(pid, signal);
      while (alive(pid)) await sleep(20);
    },
    /** A new broker on the storage the killed one left. */
    restart: () => kafkaSh('restart'),
  };
};

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export interface ClusterOptions {
  /** Picks which API server or dispatcher dies, and how long Redis stays down. */
  readonly random: Random;
  /** Announces the engines' start (it takes seconds). */
  readonly log: (line: string) => void;
  /** The crash targets taken in rotation (default all of TARGETS): a run that hunts one kind of crash. */
  readonly targets?: readonly Target[];
}

export const createClusterUnderTest = (dataDir: string, o: ClusterOptions): ServiceUnderTest => {
  if (!redisServerInstalled()) throw new Error('the distributed torture needs redis-server (apt-get install redis-server) and Java for scripts/kafka.sh');
  let kafka: ReturnType<typeof privateKafka> | undefined;
  let redis: PrivateRedis | undefined;
  let group: ReturnType<typeof createProcessGroup> | undefined;
  /** The API servers and dispatchers running; a killed one leaves its slot until its successor is ready. */
  const apis: (RoleProcess | null)[] = [null, null];
  const dispatchers: (RoleProcess | null)[] = [null, null];
  let relay: RoleProcess | null = null;
  let starts = 0;
  let turn = 0;
  let crashed: { readonly target: Target; readonly slot: number } | null = null;
  let next = 0;

  const cluster = () => {
    if (group === undefined) throw new Error('the cluster is not started');
    return group;
  };

  const spawnReady = (role: 'api' | 'relay' | 'dispatcher', deadline: number): Promise<RoleProcess> => startReady(cluster(), `${role}-${++starts}`, { ROLE: role }, deadline);

  const up = () => apis.filter((api): api is RoleProcess => api !== null);

  /** kill -9 of a role process, and waits until it is gone. */
  const kill = async (process: RoleProcess | null) => {
    process?.kill('SIGKILL');
    await process?.exited;
  };

  return {
    get url() {
      const live = up();
      if (live.length === 0) throw new Error('no API server is up');
      return (live[next++ % live.length] as RoleProcess).url;
    },
    get urls() {
      return up().map((api) => api.url);
    },
    get pid() {
      const pid = up()[0]?.child.pid;
      if (pid === undefined) throw new Error('no API server is up');
      return pid;
    },
    async start() {
      const deadline = Date.now() + RECOVERY_TIMEOUT_MS;
      kafka = privateKafka(await freePortPair());
      o.log(`starting Kafka on ${kafka.brokers} and a private Redis`);
      [, redis] = await Promise.all([kafka.start(), startPrivateRedis()]);
      group = createProcessGroup({ ...SERVICE_ENV, ...clusterEnv('torture', redis.url, kafka.brokers), DATA_DIR: dataDir });
      // The relay first: it creates the topic with all its partitions before a consumer subscribes.
      relay = await spawnReady('relay', deadline);
      [apis[0], apis[1], dispatchers[0], dispatchers[1]] = await Promise.all([
        spawnReady('api', deadline),
        spawnReady('api', deadline),
        spawnReady('dispatcher', deadline),
        spawnReady('dispatcher', deadline),
      ]);
    },
    async crash() {
      const targets = o.targets ?? TARGETS;
      const target = targets[turn++ % targets.length] as Target;
      const slot = o.random.int(0, 1);
      crashed = { target, slot };
      if (target === 'api') {
        const victim = apis[slot] ?? null;
        // Off the clients' list first, as a load balancer's health check would take it off.
        apis[slot] = null;
        await kill(victim);
      } else if (target === 'dispatcher') await kill(dispatchers[slot] ?? null);
      else if (target === 'relay') await kill(relay);
      else if (target === 'redis') await redis?.stop();
      else await kafka?.crash(slot === 0 ? 'SIGKILL' : 'SIGTERM');
      if (target === 'kafka') return slot === 0 ? 'kafka (kill -9)' : 'kafka (clean stop)';
      return target === 'api' || target === 'dispatcher' ? `${target} ${slot + 1}` : target;
    },
    async restart(write) {
      const from = Date.now();
      const deadline = from + RECOVERY_TIMEOUT_MS;
      const what = crashed;
      crashed = null;
      if (what?.target === 'api') apis[what.slot] = await spawnReady('api', deadline);
      if (what?.target === 'dispatcher') dispatchers[what.slot] = await spawnReady('dispatcher', deadline);
      if (what?.target === 'relay') relay = await spawnReady('relay', deadline);
      if (what?.target === 'kafka') await kafka?.restart();
      if (what?.target === 'redis') {
        await sleep(Math.round(o.random.next() * REDIS_DOWN_MS));
        await redis?.start();
      }
      // A restarted API server must take writes itself; otherwise any server up.
      const through = what?.target === 'api' ? apis[what.slot] : null;
      await until(cluster(), 'no successful write', () => write(through?.url), deadline);
      return Date.now() - from;
    },
    outputs: (lines) => group?.outputs(lines) ?? '',
    async stop() {
      await group?.stopAll();
      await redis?.stop();
      await kafka?.stop();
    },
  };
};
