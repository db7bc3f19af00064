// /healthz and /readyz of the health feature, over HTTP, with real engines: the SQLite log, the
// Kafka and Redis of the test run (when set), and ports where nothing answers.
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { createWorkspaceDirectory } from '../../projections/workspace-directory.js';
import { createKafka } from '../../src/bus/kafka.js';
import { kafkaCheck, logCheck, redisCheck, type HealthCheck } from '../../src/health/checks.js';
import { createHealthFeature } from '../../src/health/feature.js';
import { createCommandHandler } from '../../src/app/command-handler.js';
import { createHttpApp } from '../../src/http/app.js';
import { randomId } from '../../src/shared/ids.js';
import { createMemoryRateLimiter } from '../../src/ratelimit/memory.js';
import { createSecretBox } from '../../src/webhooks/secrets.js';
import { brokersFromEnv, openTempLog, type TempLog } from '../support/bus-kafka.js';

/** A loopback port with no listener (the discard port is never served here). */
const DEAD = '127.0.0.1:9';

describe('health endpoints', function () {
  this.timeout(20_000);
  let temp: TempLog;
  let server: Server | null = null;
  let checks: HealthCheck[] = [];

  const serve = async (list: HealthCheck[]): Promise<string> => {
    checks = list;
    const feature = createHealthFeature(list, { timeoutMs: 1000 });
    const { app } = createHttpApp({
      directory: createWorkspaceDirectory(),
      rateLimiter: createMemoryRateLimiter({ windowMs: 60_000 }),
      limits: { perKey: 100, perIp: 100 },
      adminToken: null,
      maintenanceMode: () => true,
      trustProxy: false,
      bodyLimitBytes: 1024,
      idempotency: { log: temp.log, handle: createCommandHandler(temp.log, randomId), seal: createSecretBox(randomBytes(32)), newId: randomId, nowMs: Date.now, requestTimeoutMs: 1000, leaseMs: 60_000 },
      modules: feature.routes === undefined ? [] : [feature.routes],
    });
    server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server?.once('listening', resolve));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  };

  const get = async (url: string) => {
    const response = await fetch(url);
    return { status: response.status, body: (await response.json()) as unknown };
  };

  beforeEach(() => {
    temp = openTempLog();
  });

  afterEach(async () => {
    await new Promise((resolve) => (server === null ? resolve(undefined) : server.close(resolve)));
    server = null;
    for (const check of checks) await check.close?.();
    await temp.close();
  });

  it('answers /healthz 200 and /readyz 200 when the log answers, even in maintenance mode', async () => {
    const url = await serve([logCheck(temp.log)]);
    expect(await get(`${url}/healthz`)).to.deep.equal({ status: 200, body: { status: 'ok' } });
    expect(await get(`${url}/readyz`)).to.deep.equal({ status: 200, body: { status: 'ready' } });
  });

  it('answers /readyz 503 in the short form naming each engine that does not answer', async () => {
    const url = await serve([logCheck(temp.log), redisCheck(`redis://${DEAD}`), kafkaCheck(createKafka([DEAD], 'health-test'))]);
    expect(await get(`${url}/readyz`)).to.deep.equal({ status: 503, body: { detail: 'Not ready: redis, kafka not answering' } });
    expect((await get(`${url}/healthz`)).status).to.equal(200);
  });

  it('names the log when it is closed', async () => {
    const closed = openTempLog();
    const url = await serve([logCheck(closed.log)]);
    await closed.log.close();
    expect(await get(`${url}/readyz`)).to.deep.equal({ status: 503, body: { detail: 'Not ready: log not answering' } });
    rmSync(path.dirname(closed.file), { recursive: true, force: true });
  });

  it('answers /readyz 200 with the real Kafka and Redis of the test run', async function () {
    const brokers = brokersFromEnv();
    const redisUrl = process.env['REDIS_URL'];
    if (brokers === null || redisUrl === undefined) this.skip();
    const url = await serve([logCheck(temp.log), redisCheck(redisUrl), kafkaCheck(createKafka(brokers, 'health-test'))]);
    expect(await get(`${url}/readyz`)).to.deep.equal({ status: 200, body: { status: 'ready' } });
  });
});
