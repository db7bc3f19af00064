// The service under torture: the real embedded service (ROLE=all, SQLite) as a child process over one
// data folder, killed with SIGKILL and started again on the same folder. Its URL changes with each
// start (PORT=0): clients read `url` at every request.
import { createProcessGroup, type ProcessGroup, type RoleProcess } from '../../test/support/processes.js';
import { send } from './http.js';

export const ADMIN_TOKEN = 'torture-admin-token';

/** Ask often: recovery is measured to within this. */
const PROBE_EVERY_MS = 10;
export const RECOVERY_TIMEOUT_MS = 120_000;

export interface ServiceUnderTest {
  /** Where the next request goes (a cluster spreads them over its API servers that are up). */
  readonly url: string;
  /** Every API server up now: the embedded service's one URL. */
  readonly urls: readonly string[];
  /** The running process's id (its descriptors are counted in /proc). */
  readonly pid: number;
  /** Starts the first process; resolves once it is ready. */
  start(): Promise<void>;
  /** kill -9 (of one target, in a cluster), and waits until it is gone; resolves with what it killed. */
  crash(): Promise<string>;
  /**
   * Starts again on the same folder. Resolves with the ms from the spawn until /readyz answered 200 and
   * `write` succeeded (through the restarted server when it names one).
   */
  restart(write: (through?: string) => Promise<boolean>): Promise<number>;
  outputs(lines?: number): string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Asks `done` every PROBE_EVERY_MS until it holds; past `deadline` fails with the processes' output. */
export const until = async (group: ProcessGroup, what: string, done: () => Promise<boolean>, deadline: number): Promise<void> => {
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`${what} within ${RECOVERY_TIMEOUT_MS} ms\n${group.outputs(60)}`);
    await sleep(PROBE_EVERY_MS);
  }
};

/** Spawns a process and waits for its /readyz 200 (the group's own wait asks only every 200 ms). */
export const startReady = async (group: ProcessGroup, name: string, env: Record<string, string>, deadline: number): Promise<RoleProcess> => {
  const started = await group.start(name, env, { ready: false });
  await until(group, `no /readyz 200 from ${name}`, async () => {
    const sent = await send(started.url, { method: 'GET', path: '/readyz', token: '' });
    return sent.kind === 'answer' && sent.answer.status === 200;
  }, deadline);
  return started;
};

/** What the service's processes share, embedded or distributed (scripts/torture/cluster.ts). */
export const SERVICE_ENV: Readonly<Record<string, string>> = {
  ADMIN_TOKEN,
  // Every process of a cluster must seal and open the secrets with one key (no race for the key file).
  WEBHOOK_SECRET_KEY: 'cd'.repeat(32),
  WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
  // Retries within a cycle: a delivery the crash interrupted is sent again before the next crash.
  WEBHOOK_RETRY_DELAYS: '200ms,200ms,200ms,200ms,200ms',
  // The receivers answer at once. The shared schedule's claims last twice this plus 5 s, and after a
  // Redis crash the deliveries that were due wait out one such claim: 9 s, not 15 s with 5 s.
  WEBHOOK_TIMEOUT_MS: '2000',
  RATE_LIMIT_PER_KEY: '1000000000',
  RATE_LIMIT_PER_IP: '1000000000',
};

export const createServiceUnderTest = (dataDir: string): ServiceUnderTest => {
  const group = createProcessGroup({ ...SERVICE_ENV, ROLE: 'all', DATA_DIR: dataDir });
  let current: RoleProcess | undefined;
  let starts = 0;

  const spawnReady = async (deadline: number): Promise<void> => {
    current = await startReady(group, `run-${++starts}`, {}, deadline);
  };

  return {
    get url() {
      if (current === undefined) throw new Error('the service is not started');
      return current.url;
    },
    get urls() {
      return current === undefined ? [] : [current.url];
    },
    get pid() {
      if (current?.child.pid === undefined) throw new Error('the service is not started');
      return current.child.pid;
    },
    start: () => spawnReady(Date.now() + RECOVERY_TIMEOUT_MS),
    async crash() {
      current?.kill('SIGKILL');
      await current?.exited;
      return 'the service';
    },
    async restart(write) {
      const from = Date.now();
      const deadline = from + RECOVERY_TIMEOUT_MS;
      await spawnReady(deadline);
      await until(group, 'no successful write', () => write(current?.url), deadline);
      return Date.now() - from;
    },
    outputs: (lines) => group.outputs(lines),
    stop: () => group.stopAll(),
  };
};
