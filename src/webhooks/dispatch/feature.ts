// The delivery engine as an extension of the webhooks feature (it shares the subscription read model
// and the sender). Its event source is a parameter: a tail of the log in the embedded mode (which runs
// it in a worker thread, src/webhooks/dispatch/thread.ts), the Kafka consumer group in the dispatcher
// role. Its retry schedule is in memory unless a schedule shared by several dispatchers is given
// (Redis, in the dispatcher role when REDIS_URL is set). No routes: the delivery history and manual
// retry are served by the API servers (src/webhooks/dispatch/history.ts). It also drives the history
// replays the API records (replay-runner.ts), leased to one dispatcher at a time (Redis when shared).
import { noRequest } from '../../app/request-scope.js';
import type { Core, FeatureFactory } from '../../app/core.js';
import { createWebhooksFeature, type WebhookExtension } from '../feature.js';
import { runSubscriptionCommand } from '../subscriptions.js';
import { createDispatcher, type DeliveryRecords, type Parking } from './dispatcher.js';
import { createLogTail, type LogTail, type LogTailOptions } from './log-tail.js';
import type { SharedRetrySchedule } from './retry-schedule.js';
import { createMemoryRetrySchedule } from './retry-schedule/memory.js';
import type { ReplayLeases } from './replay-leases.js';
import { createMemoryReplayLeases } from './replay-leases/memory.js';
import { createReplayRunner } from './replay-runner.js';
import { watchBacklog } from './backlog.js';
import type { DeletionListener } from './deletion-notices.js';

/** Where the dispatcher's events come from: anything that feeds dispatcher.fanOut in log order per workspace. */
export type EventSource = (options: LogTailOptions) => LogTail;

/** What several dispatchers share (Redis in the dispatcher role), and where the restored deliveries come from. */
export interface DispatchParts {
  /** The retry schedule; in memory, this dispatcher's own, when omitted. */
  readonly shared?: SharedRetrySchedule;
  readonly records?: DeliveryRecords;
  /** Which dispatcher drives a replay; in memory when omitted. */
  readonly leases?: ReplayLeases;
  /** The DELETEs answered by API servers in other processes, told before they answer. */
  readonly deletions?: DeletionListener;
  /** With its own schedule: where the attempts it need not hold wait (parking.ts). */
  readonly parking?: Parking;
}

export const webhookDispatchFrom = (source: EventSource, { shared, records, leases = createMemoryReplayLeases(), deletions, parking }: DispatchParts = {}): WebhookExtension => (core: Core, { directory, sender }) => {
  const { webhooks } = core.config;
  const dispatcher = createDispatcher({
    log: core.log,
    subscriptions: directory,
    sender,
    schedule: shared === undefined ? { own: createMemoryRetrySchedule() } : { shared },
    clock: core.clock,
    retryDelaysMs: webhooks.retryDelaysMs,
    maxInFlight: webhooks.maxInFlight,
    maxInFlightPerSubscription: webhooks.maxInFlightPerSubscription,
    maxInFlightPerWorkspace: webhooks.maxInFlightPerWorkspace,
    ...(records === undefined ? {} : { records }),
    ...(deletions === undefined ? {} : { reachable: () => deletions.reachable() }),
    ...(parking === undefined ? {} : { parking }),
    async report(workspaceId, subscriptionId, report) {
      const result = await runSubscriptionCommand(core, workspaceId, subscriptionId, report, noRequest);
      // A subscription deleted meanwhile has nothing left to count.
      const last = result._tag === 'Right' ? result.right.records.at(-1) : undefined;
      // The next report of this subscription reads the count from the directory: let it catch up.
      if (last !== undefined) await directory.waitFor(last.position);
    },
  });
  const tail = source({ log: core.log, subscriptions: directory, dispatcher });
  const replays = createReplayRunner({ log: core.log, subscriptions: directory, dispatcher, leases, clock: core.clock });
  const deleted = (subscriptionId: string): void => {
    dispatcher.subscriptionDeleted(subscriptionId).catch((error: unknown) => console.error(`webhook ${subscriptionId}: deleting its delivery history:`, error));
  };
  // The directory applies the deletion marker before the subscription's stream goes: its history goes too.
  directory.onDeleted((row) => deleted(row.id));
  let watching: { stop(): void } | null = null;
  return {
    async start() {
      await shared?.ready();
      await deletions?.listen(deleted);
      await tail.start();
      dispatcher.start();
      await replays.start();
      watching = watchBacklog(() => dispatcher.backlog(), core.clock);
    },
    deliveryEngine: async () => ({ backlog: await dispatcher.backlog(), punctuality: await dispatcher.punctuality() }),
    async stop() {
      watching?.stop();
      await replays.stop();
      await tail.stop();
      await dispatcher.stop();
      await leases.close();
      deletions?.close();
      await shared?.close();
    },
  };
};

/** The webhooks feature with its delivery engine fed by `source` (default: a tail of the log). */
export const webhooksWithDelivery =
  (source: EventSource = createLogTail, parts: DispatchParts = {}): FeatureFactory =>
  (core) =>
    createWebhooksFeature(core, [webhookDispatchFrom(source, parts)]);

/**
 * The webhooks feature with delivery, the one line for FEATURES in src/service.ts: the roles whose
 * delivery engine runs elsewhere (the embedded role's worker thread, the dispatchers) replace it with
 * the routes alone (src/bus/roles.ts).
 */
export const webhooksWithDeliveryFeature: FeatureFactory = webhooksWithDelivery();
