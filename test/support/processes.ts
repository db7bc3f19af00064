// Real service processes for the distributed tests: each is `node --import tsx src/main.ts` with its
// own environment (ROLE, PORT=0, ...), ready once it answers /readyz. Their output is kept, not
// printed, and shown when a test fails (`outputs()`).
//
//   const group = createProcessGroup(baseEnv);
//   const api = await group.start('api-a', { ROLE: 'api' });   // resolves once /readyz answers 200
//   api.url; api.kill('SIGKILL'); await api.exited;
//   await group.stopAll();                                     // SIGTERM, then SIGKILL after a grace
//
// `privateCluster` gives a spec a cluster of its own (processes, Redis, data folder) to break at will.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { randomId } from '../../src/shared/ids.js';
import { redisServerInstalled, startPrivateRedis, type PrivateRedis } from './redis-server.js';

export interface RoleProcess {
  readonly name: string;
  readonly url: string;
  readonly child: ChildProcess;
  /** Resolves once the process has exited. */
  readonly exited: Promise<void>;
  kill(signal?: NodeJS.Signals): void;
}

export interface ProcessGroup {
  /**
   * Starts a role and waits until its /readyz answers 200, or with `{ ready: false }` only until it
   * listens. `compiled`: the main module of a build (`npm run build`: dist/src/main.js) run by node
   * itself, instead of src/main.ts through tsx.
   */
  start(name: string, env: Record<string, string>, options?: { readonly ready?: boolean; readonly compiled?: string }): Promise<RoleProcess>;
  /** The last lines each process wrote, for a failing test's report. */
  outputs(lines?: number): string;
  stopAll(graceMs?: number): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;

/**
 * `npm run build` into a new folder `.cache/<prefix>…` (node_modules resolves from the repository
 * above it): the folder, for its owner to remove, and the build's main module, for `start`'s `compiled`.
 */
export const buildCompiled = async (prefix: string): Promise<{ readonly dir: string; readonly main: string }> => {
  mkdirSync('.cache', { recursive: true });
  const dir = mkdtempSync(path.join('.cache', prefix));
  await promisify(execFile)('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', dir]);
  return { dir, main: path.join(dir, 'src', 'main.js') };
};

/**
 * What every role of a test cluster shares: a Redis, the test run's Kafka, a topic and group of its
 * own, and the least session timeout the broker allows (a killed dispatcher's partitions move sooner).
 */
export const clusterEnv = (name: string, redisUrl: string, brokers: string): Record<string, string> => {
  const run = `${name}-${randomId().slice(0, 12)}`;
  return { REDIS_URL: redisUrl, KAFKA_BROKERS: brokers, KAFKA_TOPIC: run, KAFKA_GROUP: `dispatchers-${run}`, KAFKA_SESSION_TIMEOUT_MS: '6000' };
};

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const ready = async (url: string, alive: () => boolean): Promise<void> => {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline && alive()) {
    const status = await fetch(`${url}/readyz`).then((r) => r.status, () => 0);
    if (status === 200) return;
    await sleep(200);
  }
  throw new Error(`${url}/readyz did not answer 200`);
};

export const createProcessGroup = (baseEnv: Record<string, string>): ProcessGroup => {
  const children: { readonly child: ChildProcess; readonly exited: Promise<void> }[] = [];
  const output = new Map<string, string[]>();

  const start: ProcessGroup['start'] = async (name, env, options = {}) => {
    // Only what the test says: an inherited REDIS_URL or KAFKA_BROKERS must not leak into a role.
    const { PATH, HOME, NODE_OPTIONS } = process.env;
    const child = spawn(process.execPath, options.compiled === undefined ? ['--import', 'tsx', 'src/main.ts'] : [options.compiled], {
      env: { PATH: PATH ?? '', HOME: HOME ?? '', ...(NODE_OPTIONS === undefined ? {} : { NODE_OPTIONS }), PORT: '0', HOST: '127.0.0.1', ...baseEnv, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    output.set(`${name} (pid ${child.pid})`, lines);
    const exited = new Promise<void>((resolve) =>
      child.once('exit', (code, signal) => {
        // In the outputs a failing test prints: a process that is gone says so, and how.
        lines.push(`(exited: ${code ?? signal})`);
        resolve();
      }),
    );
    const listening = new Promise<string>((resolve, reject) => {
      let text = '';
      child.stdout?.on('data', (chunk: Buffer) => {
        text += chunk.toString('utf8');
        lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
        const url = /listening on (http:\/\/\S+)/.exec(text)?.[1];
        if (url !== undefined) resolve(url);
      });
      child.stderr?.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== '')));
      void exited.then(() => reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before listening:\n${lines.slice(-30).join('\n')}`)));
    });
    children.push({ child, exited });
    const url = await listening;
    if (options.ready !== false) await ready(url, () => child.exitCode === null && child.signalCode === null);
    return { name, url, child, exited, kill: (signal = 'SIGTERM') => void child.kill(signal) };
  };

  return {
    start,
    outputs(count = 40) {
      return [...output].map(([name, lines]) => `--- ${name}\n${lines.slice(-count).join('\n')}`).join('\n');
    },
    async stopAll(graceMs = 5_000) {
      const running = children.filter(({ child }) => child.exitCode === null && child.signalCode === null);
      for (const { child } of running) child.kill('SIGTERM');
      await Promise.all(
        running.map(async ({ child, exited }) => {
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          await exited;
          clearTimeout(timer);
        }),
      );
    },
  };
};

export interface PrivateCluster {
  readonly group: ProcessGroup;
  /** Its own redis-server, to stop, pause and restart without touching the run's shared one. */
  readonly redis: PrivateRedis;
  readonly dataDir: string;
  /** Stops its processes and its Redis, and removes its data folder. */
  stop(): Promise<void>;
}

/** Whether a private cluster can run: the test run has its engines (REDIS_URL, KAFKA_BROKERS) and redis-server is installed. */
export const privateClusterPossible = (): boolean =>
  process.env['REDIS_URL'] !== undefined && process.env['KAFKA_BROKERS'] !== undefined && redisServerInstalled();

/**
 * A cluster of a spec's own: a private Redis, the test run's Kafka with a topic and group of its own
 * (`clusterEnv`), a fresh data folder; `env` adds the spec's settings. Its roles are started with
 * `group.start`.
 */
export const privateCluster = async (name: string, env: Record<string, string>): Promise<PrivateCluster> => {
  const brokers = process.env['KAFKA_BROKERS'];
  if (brokers === undefined) throw new Error('privateCluster: KAFKA_BROKERS is not set');
  const redis = await startPrivateRedis();
  const dataDir = mkdtempSync(path.join(tmpdir(), `sp-${name}-`));
  const group = createProcessGroup({ ...clusterEnv(name, redis.url, brokers), DATA_DIR: dataDir, ...env });
  return {
    group,
    redis,
    dataDir,
    async stop() {
      await group.stopAll();
      await redis.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
};

const socketInodes = (port: number): Set<string> => {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      const local = fields[1]?.split(':')[1];
      if (local !== undefined && parseInt(local, 16) === port && fields[9] !== undefined) inodes.add(fields[9]);
    }
  }
  return inodes;
};

/**
 * Which of `processes` holds the TCP socket with local port `port` (Linux /proc), e.g. the sender of
 * a request a receiver got from that port; undefined when none does (or it is closed already).
 */
export const socketOwner = <P extends RoleProcess>(port: number, processes: readonly P[]): P | undefined => {
  const inodes = socketInodes(port);
  return processes.find((p) => {
    try {
      return readdirSync(`/proc/${p.child.pid}/fd`).some((fd) => {
        const target = /^socket:\[(\d+)\]$/.exec(safeReadlink(`/proc/${p.child.pid}/fd/${fd}`))?.[1];
        return target !== undefined && inodes.has(target);
      });
    } catch {
      return false;
    }
  });
};

const safeReadlink = (file: string): string => {
  try {
    return readlinkSync(file);
  } catch {
    return '';
  }
};
