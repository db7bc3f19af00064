// A private redis-server on a free loopback port, for tests that stop, pause and restart Redis
// (the shared REDIS_URL server must not be touched). Null when redis-server is not installed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

export interface PrivateRedis {
  readonly url: string;
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: no persistence). */
  start(): Promise<void>;
  /** SIGSTOP: the port still accepts connections but nothing answers. */
  pause(): void;
  resume(): void;
}

export const redisServerInstalled = (): boolean => spawnSync('redis-server', ['--version']).status === 0;

const freePort = async (): Promise<number> => {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
};

const answersPing = async (url: string): Promise<boolean> => {
  const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
};

export const startPrivateRedis = async (): Promise<PrivateRedis> => {
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | null = null;

  const start = async () => {
    child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    for (let i = 0; i < 100 && !(await answersPing(url)); i++) await new Promise((r) => setTimeout(r, 50));
    if (!(await answersPing(url))) throw new Error(`redis-server on port ${port} did not start`);
  };
  const stop = async () => {
    const running = child;
    child = null;
    if (running === null || running.exitCode !== null) return;
    running.kill('SIGCONT');
    running.kill('SIGKILL');
    await once(running, 'exit');
  };

  await start();
  return {
    url,
    start,
    stop,
    pause: () => child?.kill('SIGSTOP'),
    resume: () => child?.kill('SIGCONT'),
  };
};
