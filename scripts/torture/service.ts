// The service under torture: the real embedded service (ROLE=all, SQLite) as a child process over one
// data folder, killed with SIGKILL and started again on the same folder. Its URL changes with each
// start (PORT=0): clients read `url` at every request.
import { createProcessGroup, type RoleProcess } from '../../test/support/processes.js';
import { send } from './http.js';

export const ADMIN_TOKEN = 'torture-admin-token';

/** Ask often: recovery is measured to within this. */
const PROBE_EVERY_MS = 10;
const RECOVERY_TIMEOUT_MS = 120_000;

export interface ServiceUnderTest {
  readonly url: string;
  /** The running process's id (its descriptors are counted in /proc). */
  readonly pid: number;
  /** Starts the first process; resolves once it is ready. */
  start(): Promise<void>;
  /** kill -9, and waits until the process is gone. */
  crash(): Promise<void>;
  /**
   * Starts again on the same folder. Resolves with the ms from the spawn until /readyz answered 200 and
   * `write` succeeded.
   */
  restart(write: () => Promise<boolean>): Promise<number>;
  outputs(lines?: number): string;
  stop(): Promise<void>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const createServiceUnderTest = (dataDir: string): ServiceUnderTest => {
  const group = createProcessGroup({
    ROLE: 'all',
    DATA_DIR: dataDir,
    ADMIN_TOKEN,
    WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    // Retries within a cycle: a delivery the crash interrupted is sent again before the next crash.
    WEBHOOK_RETRY_DELAYS: '200ms,200ms,200ms,200ms,200ms',
    WEBHOOK_TIMEOUT_MS: '5000',
    RATE_LIMIT_PER_KEY: '1000000000',
    RATE_LIMIT_PER_IP: '1000000000',
  });
  let current: RoleProcess | undefined;
  let starts = 0;

  const until = async (what: string, done: () => Promise<boolean>, deadline: number) => {
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`the service: ${what} within ${RECOVERY_TIMEOUT_MS} ms\n${group.outputs(60)}`);
      await sleep(PROBE_EVERY_MS);
    }
  };

  /** Spawns a process and waits for /readyz 200 (the group's own wait asks only every 200 ms). */
  const spawnReady = async (deadline: number): Promise<void> => {
    const started = (current = await group.start(`run-${++starts}`, {}, { ready: false }));
    await until('no /readyz 200', async () => {
      const sent = await send(started.url, { method: 'GET', path: '/readyz', token: '' });
      return sent.kind === 'answer' && sent.answer.status === 200;
    }, deadline);
  };

  return {
    get url() {
      if (current === undefined) throw new Error('the service is not started');
      return current.url;
    },
    get pid() {
      if (current?.child.pid === undefined) throw new Error('the service is not started');
      return current.child.pid;
    },
    start: () => spawnReady(Date.now() + RECOVERY_TIMEOUT_MS),
    async crash() {
      current?.kill('SIGKILL');
      await current?.exited;
    },
    async restart(write) {
      const from = Date.now();
      const deadline = from + RECOVERY_TIMEOUT_MS;
      await spawnReady(deadline);
      await until('no successful write', write, deadline);
      return Date.now() - from;
    },
    outputs: (lines) => group.outputs(lines),
    stop: () => group.stopAll(),
  };
};
