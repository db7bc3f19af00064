// Health endpoints outside the versioned API, without auth, answered even in maintenance mode:
// GET /healthz: the process is alive (200 {status: 'ok'}); GET /readyz: every engine this process's
// role needs answers within the timeout (200 {status: 'ready'}), else 503 in the short error form
// naming what is down. Orchestrators (docker-compose healthchecks) poll /readyz. Where the process
// runs a delivery engine, /readyz asked with the admin token also tells its backlog (`webhooks`:
// waiting attempts and how late the earliest is); a backlog never makes the process unready, which
// would only take it out of rotation. Without the token the answer stays the bare status.
import type { Core, Feature } from '../app/core.js';
import { createKafka } from '../bus/kafka.js';
import type { Config } from '../config/config.js';
import { carriesAdminToken } from '../http/admin-token.js';
import { short } from '../http/api-error.js';
import type { EventLog } from '../log/event-log.js';
import { backlogBody, type EngineStatusSource } from '../webhooks/dispatch/backlog.js';
import { kafkaCheck, logCheck, redisCheck, type HealthCheck } from './checks.js';

const CHECK_TIMEOUT_MS = 2000;

/** The engines of a role: the log always, Redis when configured, Kafka for the roles on the bus. */
export const checksFor = (config: Config, log: EventLog): HealthCheck[] => [
  logCheck(log),
  ...(config.redisUrl === null ? [] : [redisCheck(config.redisUrl)]),
  ...(config.kafkaBrokers !== null && (config.role === 'relay' || config.role === 'dispatcher')
    ? [kafkaCheck(createKafka(config.kafkaBrokers, `${config.role}-health`))]
    : []),
];

const answers = (check: HealthCheck, timeoutMs: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
  return Promise.race([check.check().then(() => true, () => false), timeout]).finally(() => clearTimeout(timer));
};

export interface HealthOptions {
  readonly timeoutMs?: number;
  /** The process's delivery engine, whose backlog /readyz tells the admin token. */
  readonly delivery?: { readonly engine: EngineStatusSource; readonly core: Pick<Core, 'config' | 'clock'> };
}

export const createHealthFeature = (checks: readonly HealthCheck[], options: HealthOptions = {}): Feature => {
  const { delivery } = options;
  /** The delivery backlog for the admin token, nothing for anyone else or while the engine does not answer. */
  const backlogFor = async (authorization: string) => {
    if (delivery === undefined || !carriesAdminToken(authorization, delivery.core.config.adminToken)) return {};
    const status = await delivery.engine();
    return status === null ? {} : { webhooks: backlogBody(status.backlog, delivery.core.clock()) };
  };
  return {
    name: 'health',
    routes: {
      open(router) {
        router.get('/healthz', (ctx) => {
          ctx.body = { status: 'ok' };
        });
        router.get('/readyz', async (ctx) => {
          const results = await Promise.all(checks.map((check) => answers(check, options.timeoutMs ?? CHECK_TIMEOUT_MS)));
          const down = checks.filter((_, i) => !results[i]).map((check) => check.name);
          if (down.length > 0) throw short(503, `Not ready: ${down.join(', ')} not answering`);
          ctx.body = { status: 'ready', ...(await backlogFor(ctx.get('Authorization'))) };
        });
      },
    },
    async stop() {
      for (const check of checks) await check.close?.();
    },
  };
};

/** /healthz and /readyz for the engines the configured role needs (and the backlog of its delivery engine, if it runs one), and the role's own `checks`. */
export const healthFeature = (core: Core, engine?: EngineStatusSource, checks: readonly HealthCheck[] = []): Feature =>
  createHealthFeature([...checksFor(core.config, core.log), ...checks], engine === undefined ? {} : { delivery: { engine, core } });
