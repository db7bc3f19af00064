// The composition root: the only module that knows which adapter runs behind each port.
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import type { DocumentStores } from '../projections/tickets-store.js';
import { memoryDocumentStores } from '../projections/tickets-store-memory.js';
import { createRedisDocumentStores } from '../projections/tickets-store-redis.js';
import { noRequest } from './app/request-scope.js';
import { openSqliteDocumentStores, READ_MODELS_FILE } from '../projections/tickets-store-sqlite.js';
import { createWorkspaceDirectory } from '../projections/workspace-directory.js';
import type { Core, Feature, FeatureFactory } from './app/core.js';
import { createFreshRead } from './app/fresh-read.js';
import { createProjectionRunner } from './app/projection-runner.js';
import { logCore } from './app/log-core.js';
import type { Config } from './config/config.js';
import { createHttpApp, type RegisteredRoute } from './http/app.js';
import { holdWrites } from './http/middleware/write-hold.js';
import { adminRoutes } from './http/routes/admin.js';
import { metricsRoutes } from './metrics/routes.js';
import { createHttpServer } from './http/server.js';
import { systemMicros, type MicrosClock } from './log/clock.js';
import { holdInstanceLock, type InstanceLock } from './log/instance-lock.js';
import { openRoleLog, type RoleLog } from './bus/role-log.js';
import { roleFeatures } from './bus/roles.js';
import { createMemoryRateLimiter } from './ratelimit/memory.js';
import { createRedisRateLimiter } from './ratelimit/redis.js';
import { randomId } from './shared/ids.js';
import { createMemoryNotifier } from './updates/memory.js';
import { createRedisNotifier } from './updates/redis.js';
import { createUpdatesFeature } from './updates/feature.js';
import { mediaFeature } from './media/feature.js';
import { articlesFeature } from './articles/feature.js';
import { billingFeature } from './billing/feature.js';
import { operatorsFeature } from './operators/feature.js';
import { webhooksWithDeliveryFeature } from './webhooks/dispatch/feature.js';
import { dispatcherThreadOf, type DispatcherThread } from './webhooks/dispatch/thread.js';
import { secretBoxOf } from './webhooks/secrets.js';
import { backlogRoutes } from './webhooks/dispatch/backlog.js';
import { createTicketsFeature } from './tickets/feature.js';
import { openApiRoutes } from './openapi/routes.js';
import type { RouteModule } from './http/app.js';


/** The route modules, and the one that describes them (GET /api/v1/openapi.json). */
const withApiDocument = (modules: RouteModule[]): RouteModule[] => [...modules, openApiRoutes(modules)];

export interface Service {
  readonly core: Core;
  /** Base URL of the listening server, e.g. http://127.0.0.1:8080. */
  readonly url: string;
  readonly server: Server;
  /** The first workspace's API key when this start created it (shown once), else null. */
  readonly firstApiKey: { readonly workspaceId: string; readonly apiKey: string } | null;
  /** Every route the server registered, on every surface. */
  readonly routes: readonly RegisteredRoute[];
  /** The embedded role's webhook delivery engine, in its worker thread (null in the other roles). */
  readonly dispatcherThread: DispatcherThread | null;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** The main thread's clock (the embedded role's dispatcher thread keeps the system's). */
  readonly clock?: MicrosClock;
  /** Create a first workspace when the log has none (npm start does; tests usually use the admin API). */
  readonly bootstrapWorkspace?: boolean;
}

export const FEATURES: readonly FeatureFactory[] = [createUpdatesFeature, mediaFeature, articlesFeature, billingFeature, operatorsFeature, webhooksWithDeliveryFeature, createTicketsFeature];

const SHUTDOWN_GRACE_MS = 5_000;
/** Key changes read at once when a request checks the directory is current; more means wait for the head. */
const KEY_CHANGES_PAGE = 100;

/**
 * The ticket, message and contact read models: the embedded `all` role keeps them in a SQLite file
 * beside the log (resumed from its checkpoints at start, not rebuilt); API servers share them in Redis
 * when REDIS_URL is set; anything else keeps them in memory, rebuilt at start (an API server without
 * Redis, possibly one of several on a host, which could not share one file; the other roles serve no tickets).
 */
const openDocumentStores = (config: Config): DocumentStores => {
  if (config.role === 'all') {
    mkdirSync(config.dataDir, { recursive: true });
    return openSqliteDocumentStores({ file: path.join(config.dataDir, READ_MODELS_FILE) });
  }
  return config.role === 'api' && config.redisUrl !== null ? createRedisDocumentStores({ url: config.redisUrl }) : memoryDocumentStores;
};

/** Shared state lives in Redis when REDIS_URL is set (distributed mode), in this process otherwise. */
const openSharedState = async (config: Config) =>
  config.redisUrl === null
    ? { notifier: createMemoryNotifier(), rateLimiter: createMemoryRateLimiter({ windowMs: config.rateLimit.windowMs }) }
    : { notifier: await createRedisNotifier({ url: config.redisUrl }), rateLimiter: createRedisRateLimiter({ url: config.redisUrl, windowMs: config.rateLimit.windowMs }) };

/** The embedded role shares its log with its dispatcher thread: this keeps a second one off the data folder. */
const holdDataDir = (config: Config): InstanceLock => {
  if (config.role !== 'all') return { release: () => undefined };
  mkdirSync(config.dataDir, { recursive: true });
  return holdInstanceLock(config.dataDir);
};

export const startService = async (config: Config, options: ServiceOptions = {}): Promise<Service> => {
  const clock = options.clock ?? systemMicros;
  const instance = holdDataDir(config);
  let log: RoleLog;
  let documents: DocumentStores;
  try {
    log = await openRoleLog(config, clock);
  } catch (error) {
    instance.release();
    throw error;
  }
  try {
    documents = openDocumentStores(config);
  } catch (error) {
    await log.close();
    instance.release();
    throw error;
  }
  const base = logCore(log, clock);
  const { handle, workspaces } = base;
  const directory = createWorkspaceDirectory();
  const directoryRunner = createProjectionRunner(log, { name: 'workspace-directory', types: directory.types, checkpoint: () => 0, apply: directory.apply });
  const core: Core = {
    ...base,
    config,
    directory,
    directorySettled: directoryRunner.waitFor,
    documents,
    ...(await openSharedState(config)),
  };
  const features: Feature[] = roleFeatures(core, FEATURES);

  await directoryRunner.start();
  await directoryRunner.waitFor(await log.headPosition());
  for (const feature of features) await feature.start?.();

  let firstApiKey: Service['firstApiKey'] = null;
  if (options.bootstrapWorkspace === true && directory.count() === 0) {
    const created = await workspaces.create('Default workspace', config.defaultPlan, noRequest);
    await directoryRunner.waitFor(created.position);
    firstApiKey = { workspaceId: created.workspaceId, apiKey: created.apiKey };
  }

  // The last key or workspace change committed past what the directory applied, by any process: a
  // filtered read of the few events since, not a wait for every other write to be applied too.
  const lastKeyChange = createFreshRead(async () => {
    const applied = directoryRunner.position();
    // Mostly nothing was committed since: one look at the head answers it.
    if ((await log.headPosition()) <= applied) return applied;
    const changes = await log.readAll({ after: applied, types: directory.types, limit: KEY_CHANGES_PAGE });
    return changes.length < KEY_CHANGES_PAGE ? (changes.at(-1)?.position ?? applied) : log.headPosition();
  });
  const thread = dispatcherThreadOf(features);
  // The delivery engine's status, where this process runs one (in a thread or on its event loop).
  const engine = features.find((f) => f.deliveryEngine !== undefined)?.deliveryEngine;
  const writeHold = features.find((f) => f.writeHold !== undefined)?.writeHold;
  const held = writeHold === undefined || config.webhooks.backpressure.lateMs === 0 ? undefined : holdWrites(writeHold, config.webhooks.backpressure.maxHoldMs);
  const { app, routes } = createHttpApp({
    directory,
    rateLimiter: core.rateLimiter,
    limits: config.rateLimit,
    adminToken: config.adminToken,
    maintenanceMode: () => config.maintenanceMode,
    trustProxy: config.trustProxy,
    bodyLimitBytes: config.bodyLimitBytes,
    // Only the embedded role writes every key change itself; other API servers share the log.
    ...(config.role === 'all' ? {} : { keysCurrent: async () => directoryRunner.waitFor(await lastKeyChange()) }),
    ...(held === undefined ? {} : { heldWrites: held.middleware }),
    // Answers holding secrets are recorded sealed with the key the webhooks' secrets are sealed with.
    idempotency: { log, handle, seal: secretBoxOf({ secretKey: config.webhooks.secretKey, dataDir: config.dataDir }, config.webhooks.previousSecretKeys), newId: randomId, nowMs: () => Math.floor(clock() / 1000), requestTimeoutMs: config.http.requestTimeoutMs, leaseMs: config.idempotencyLeaseMs },
    modules: withApiDocument([
      adminRoutes({ workspaces, planNames: Object.keys(config.plans), defaultPlan: config.defaultPlan, settled: directoryRunner.waitFor }),
      metricsRoutes(
        [...(thread === null ? [] : [{ thread: thread.check.name, usedBytes: thread.heapUsedBytes }]), ...features.flatMap((f) => f.workers ?? [])],
        engine === undefined ? undefined : { source: engine, clock },
        held?.figures,
        log.stats,
        features.flatMap((f) => f.counts ?? []),
      ),
      ...(engine === undefined ? [] : [backlogRoutes(engine, clock)]),
      ...features.flatMap((f) => (f.routes === undefined ? [] : [f.routes])),
    ]),
  });
  const server = createHttpServer(app, config.http);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
    server.listen({ port: config.port, host: config.host, backlog: config.http.listenBacklog });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;

  let closing: Promise<void> | null = null;
  const close = async () => {
    for (const feature of features) await feature.drain?.();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      // Requests still running get a grace period; keep-alive sockets must not hold shutdown open.
      setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    });
    for (const feature of [...features].reverse()) await feature.stop?.();
    await directoryRunner.stop();
    await core.notifier.close();
    await core.rateLimiter.close();
    await core.documents.close();
    await log.close();
    instance.release();
  };

  return {
    core,
    url: `http://${host === '0.0.0.0' || host === '[::]' ? '127.0.0.1' : host}:${address.port}`,
    server,
    firstApiKey,
    routes,
    dispatcherThread: thread,
    close: () => (closing ??= close()),
  };
};
