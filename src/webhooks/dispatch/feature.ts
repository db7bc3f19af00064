// The delivery engine as an extension of the webhooks feature (it shares the subscription read model
// and the sender): embedded mode, the dispatcher fed by a tail of the log, the retry schedule in
// memory, rebuilt from the log at start. Routes: the delivery history and manual retry extensions.
import type { Core, FeatureFactory } from '../../app/core.js';
import { createWebhooksFeature, type WebhookExtension } from '../feature.js';
import { runSubscriptionCommand } from '../subscriptions.js';
import { createDispatcher } from './dispatcher.js';
import { createLogTail } from './log-tail.js';
import { createMemoryRetrySchedule } from './retry-schedule/memory.js';
import { deliveryRoutes } from './routes.js';

export const webhookDispatch: WebhookExtension = (core: Core, { directory, sender }) => {
  const { webhooks } = core.config;
  const dispatcher = createDispatcher({
    log: core.log,
    subscriptions: directory,
    sender,
    schedule: createMemoryRetrySchedule(),
    clock: core.clock,
    retryDelaysMs: webhooks.retryDelaysMs,
    maxInFlight: webhooks.maxInFlight,
    maxInFlightPerSubscription: webhooks.maxInFlightPerSubscription,
    async report(workspaceId, subscriptionId, report) {
      const result = await runSubscriptionCommand(core, workspaceId, subscriptionId, report);
      // A subscription deleted meanwhile has nothing left to count.
      const last = result._tag === 'Right' ? result.right.records.at(-1) : undefined;
      // The next report of this subscription reads the count from the directory: let it catch up.
      if (last !== undefined) await directory.waitFor(last.position);
    },
  });
  const tail = createLogTail({ log: core.log, subscriptions: directory, dispatcher });
  // The directory applies the deletion marker before the subscription's stream goes: its history goes too.
  directory.onDeleted((row) => {
    dispatcher.subscriptionDeleted(row.id).catch((error: unknown) => console.error(`webhook ${row.id}: deleting its delivery history:`, error));
  });
  return {
    routes: deliveryRoutes({ log: core.log, subscriptions: directory, dispatcher }),
    async start() {
      await tail.start();
      dispatcher.start();
    },
    async stop() {
      await tail.stop();
      await dispatcher.stop();
    },
  };
};

/** The webhooks feature with its delivery engine: the one line for FEATURES in src/service.ts. */
export const webhooksWithDeliveryFeature: FeatureFactory = (core) => createWebhooksFeature(core, [webhookDispatch]);
