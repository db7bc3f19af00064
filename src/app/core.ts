// What every feature is built from. The composition root (src/service.ts) makes one Core, choosing
// the adapters from configuration; features see only ports.
import type { DocumentStores } from '../../projections/tickets-store.js';
import type { WorkspaceDirectory } from '../../projections/workspace-directory.js';
import type { Config } from '../config/config.js';
import type { EventLog } from '../log/event-log.js';
import type { MicrosClock } from '../log/clock.js';
import type { RateLimiter } from '../ratelimit/rate-limiter.js';
import type { IdSource } from '../shared/ids.js';
import type { Notifier } from '../updates/notifier.js';
import type { EngineStatusSource } from '../webhooks/dispatch/backlog.js';
import type { RouteModule } from '../http/app.js';
import type { WriteHold } from '../http/middleware/write-hold.js';
import type { RunningCount, WorkerHeap } from '../metrics/routes.js';
import type { CommandHandler } from './command-handler.js';
import type { RequestScope } from './request-scope.js';
import type { WorkspaceCommands } from './workspaces.js';

export interface Core {
  readonly config: Config;
  readonly log: EventLog;
  /** Microseconds since the epoch; offsets and timestamps come from it. */
  readonly clock: MicrosClock;
  /** A new event id (shared/ids.ts eventId: grows with time); resource ids come from resourceId. */
  readonly newId: IdSource;
  /** A new resource id (ticket, message…): derived from the request's idempotency claim when it has one (app/request-claim.ts). */
  readonly resourceId: (kind: string, scope: RequestScope | undefined) => string;
  readonly handle: CommandHandler;
  readonly directory: WorkspaceDirectory;
  /** Resolves once the workspace directory has applied the event at `position`. */
  readonly directorySettled: (position: number) => Promise<void>;
  readonly workspaces: WorkspaceCommands;
  readonly notifier: Notifier;
  readonly rateLimiter: RateLimiter;
  /** Where the ticket and contact read models live (memory embedded, Redis shared by API servers). */
  readonly documents: DocumentStores;
}

/** A slice of the service: its routes and the background work it starts and stops. */
export interface Feature {
  readonly name: string;
  readonly routes?: RouteModule;
  start?(): Promise<void>;
  /** Called on shutdown before the HTTP server closes (e.g. to answer pending long polls). */
  drain?(): Promise<void>;
  stop?(): Promise<void>;
  /** The webhook delivery engine's backlog and punctuality, on the feature that runs it (or its thread). */
  readonly deliveryEngine?: EngineStatusSource;
  /** Worker threads the feature runs, for the metrics route's heap gauge. */
  readonly workers?: readonly WorkerHeap[];
  /** Counts the feature keeps since the start, for the metrics route. */
  readonly counts?: readonly RunningCount[];
  /** When writes are to wait for webhook delivery (its backpressure: src/webhooks/dispatch/backpressure.ts). */
  readonly writeHold?: WriteHold;
}

export type FeatureFactory = (core: Core) => Feature;
