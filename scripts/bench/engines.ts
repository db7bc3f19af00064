// Private Redis and Kafka for the benchmarks that need them: started and stopped through the same
// scripts the tests use (scripts/redis.sh, scripts/kafka.sh), on ports of the bench's own.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const exec = promisify(execFile);

export interface BenchPorts {
  readonly redis: number;
  readonly kafka: number;
}

/** Runs `scripts/<name>.sh <command>` with the bench's ports. */
export const engine = (ports: BenchPorts) => (name: 'kafka' | 'redis', command: 'start' | 'stop' | 'restart') =>
  exec('bash', [`scripts/${name}.sh`, command], { cwd: ROOT, env: { ...process.env, KAFKA_PORT: String(ports.kafka), REDIS_PORT: String(ports.redis) } });

/** The pid of the engine `name` started on `port` (its script's pid file), or undefined when it has none. */
export const enginePid = (name: 'kafka' | 'redis', port: number): number | undefined => {
  try {
    return Number(readFileSync(path.join(ROOT, `.cache/run/${name}-${port}/${name}.pid`), 'utf8'));
  } catch {
    return undefined;
  }
};
