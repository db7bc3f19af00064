// The webhooks feature: the subscription read model, the sender, the management routes, and any
// extensions built on them (the delivery engine), started after the read model and stopped before it.
// Once started, it seals with the current key the secrets that a previous key sealed.
import type { Core, Feature } from '../app/core.js';
import type { ApiRouter, RouteModule } from '../http/app.js';
import { webhookRoutes } from './routes.js';
import { resealSecrets } from './reseal.js';
import { secretBoxOf, secretsDoNotOpen, type SecretBox } from './secrets.js';
import { createSender, type Sender } from './sender.js';
import { createSubscriptionDirectory, type SubscriptionReadModel } from './subscriptions.js';

export interface WebhookParts {
  readonly directory: SubscriptionReadModel;
  readonly sender: Sender;
  readonly secrets: SecretBox;
  /**
   * What a subscription's DELETE awaits before it answers, once the deletion is applied here (a
   * delivery engine elsewhere in the process cancelling the subscription's attempts in flight).
   */
  readonly beforeDeleteAnswered: ((subscriptionId: string) => Promise<void>)[];
}

/** A part of the webhooks feature that needs the shared read model and sender. */
export type WebhookExtension = (core: Core, parts: WebhookParts) => Omit<Feature, 'name'>;

const SURFACES = ['api', 'admin', 'internal', 'signed', 'open'] as const;

export const mergeRoutes = (modules: readonly (RouteModule | undefined)[]): RouteModule => ({
  ...(Object.fromEntries(SURFACES.map((surface) => [surface, (router: ApiRouter) => modules.forEach((m) => m?.[surface]?.(router))])) as RouteModule),
  operations: modules.flatMap((m) => m?.operations ?? []),
});

export const createWebhooksFeature = (core: Core, extensions: readonly WebhookExtension[] = []): Feature => {
  const { webhooks, dataDir } = core.config;
  const keySource = { secretKey: webhooks.secretKey, dataDir };
  const secrets = secretBoxOf(keySource, webhooks.previousSecretKeys);
  const directory = createSubscriptionDirectory(core.log, secrets, (unopened) => secretsDoNotOpen(unopened, keySource), core.clock);
  const sender = createSender({ timeoutMs: webhooks.timeoutMs, allowedNetworks: webhooks.allowedNetworks, clock: core.clock });
  const parts: WebhookParts = { directory, sender, secrets, beforeDeleteAnswered: [] };
  const extras = extensions.map((extend) => extend(core, parts));
  const deliveryEngine = extras.find((e) => e.deliveryEngine !== undefined)?.deliveryEngine;
  const writeHold = extras.find((e) => e.writeHold !== undefined)?.writeHold;
  let stopping = false;
  let resealing = Promise.resolve();
  return {
    name: 'webhooks',
    routes: mergeRoutes([webhookRoutes(core, parts), ...extras.map((e) => e.routes)]),
    ...(deliveryEngine === undefined ? {} : { deliveryEngine }),
    ...(writeHold === undefined ? {} : { writeHold }),
    async start() {
      await directory.start();
      for (const extra of extras) await extra.start?.();
      // In the background: meanwhile the previous key still opens what it sealed.
      resealing = resealSecrets(core, directory, secrets, () => stopping).then(({ resealed, failed }) => {
        if (resealed + failed > 0) console.log(`webhook secrets sealed again with the current key: ${resealed}${failed > 0 ? `, ${failed} failed` : ''}`);
      });
    },
    async drain() {
      for (const extra of extras) await extra.drain?.();
    },
    async stop() {
      stopping = true;
      await resealing;
      for (const extra of [...extras].reverse()) await extra.stop?.();
      await directory.stop();
      await sender.close();
    },
  };
};
