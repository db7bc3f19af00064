// The webhooks feature: the subscription read model, the sender, the management routes, and any
// extensions built on them (the delivery engine), started after the read model and stopped before it.
import type { Core, Feature } from '../app/core.js';
import type { ApiRouter, RouteModule } from '../http/app.js';
import { webhookRoutes } from './routes.js';
import { createSecretBox, loadSecretKey, type SecretBox } from './secrets.js';
import { createSender, type Sender } from './sender.js';
import { createSubscriptionDirectory, type SubscriptionReadModel } from './subscriptions.js';

export interface WebhookParts {
  readonly directory: SubscriptionReadModel;
  readonly sender: Sender;
  readonly secrets: SecretBox;
}

/** A part of the webhooks feature that needs the shared read model and sender. */
export type WebhookExtension = (core: Core, parts: WebhookParts) => Omit<Feature, 'name'>;

const SURFACES = ['api', 'admin', 'internal', 'open'] as const;

const mergeRoutes = (modules: readonly (RouteModule | undefined)[]): RouteModule =>
  Object.fromEntries(
    SURFACES.map((surface) => [surface, (router: ApiRouter) => modules.forEach((m) => m?.[surface]?.(router))]),
  ) as RouteModule;

export const createWebhooksFeature = (core: Core, extensions: readonly WebhookExtension[] = []): Feature => {
  const { webhooks, dataDir } = core.config;
  const secrets = createSecretBox(loadSecretKey({ secretKey: webhooks.secretKey, dataDir }));
  const directory = createSubscriptionDirectory(core.log, secrets);
  const sender = createSender({ timeoutMs: webhooks.timeoutMs, allowedNetworks: webhooks.allowedNetworks });
  const parts: WebhookParts = { directory, sender, secrets };
  const extras = extensions.map((extend) => extend(core, parts));
  return {
    name: 'webhooks',
    routes: mergeRoutes([webhookRoutes(core, parts), ...extras.map((e) => e.routes)]),
    async start() {
      await directory.start();
      for (const extra of extras) await extra.start?.();
    },
    async drain() {
      for (const extra of extras) await extra.drain?.();
    },
    async stop() {
      for (const extra of [...extras].reverse()) await extra.stop?.();
      await directory.stop();
      await sender.close();
    },
  };
};
