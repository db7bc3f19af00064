// Webhook management (spec "Webhook management", rules 1-6): create, list, patch, delete, the
// synchronous test delivery, and (beyond the contract) secret rotation with a grace period. Routes
// decode, run a subscription command, and shape the answer.
import * as t from 'io-ts';
import type { Core } from '../app/core.js';
import { loadState, type CommandResult } from '../app/command-handler.js';
import { envelopeOf, isoLocal } from '../domain/envelope.js';
import { domainError, type DomainError } from '../domain/errors.js';
import {
  DEFAULT_GRACE_SECONDS,
  MAX_GRACE_SECONDS,
  WEBHOOK_TEST_EVENT,
  WebhookTestData,
  subscriptionAggregate,
  subscriptionStream,
  type SubscriptionCommand,
  type SubscriptionState,
} from '../domain/subscription/subscription.js';
import { ApiFailure, business, notFound } from '../http/api-error.js';
import type { RouteModule } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { always, answer, refusal, type Operation } from '../http/operations.js';
import { decode, jsonInt, text } from '../http/validation.js';
import { newWebhookSecret, type SecretBox } from './secrets.js';
import type { Sender } from './sender.js';
import { signatureHeaders, type SigningSecrets } from './signature.js';
import { createSubscriptionSlots } from './slots.js';
import { runSubscriptionCommand, secretContext, type SubscriptionDirectory } from './subscriptions.js';

export interface WebhookRouteDeps {
  readonly directory: SubscriptionDirectory;
  readonly sender: Sender;
  readonly secrets: SecretBox;
  /** Awaited by a DELETE once its marker is applied, before it answers (see WebhookParts). */
  readonly beforeDeleteAnswered: readonly ((subscriptionId: string) => Promise<void>)[];
}

/**
 * Not checked at registration (rule 3): any string up to a bound that only keeps the log sane. The
 * sender refuses what is not an absolute http(s) URL, and the test endpoint shows it.
 */
const MAX_URL_LENGTH = 8192;
const Url = text(MAX_URL_LENGTH, `string (max ${MAX_URL_LENGTH} characters)`);
const Events = t.array(t.string, 'array of event names');
const Description = text(2000);

const Create = t.intersection([t.type({ url: Url }), t.partial({ events: Events, description: Description })]);
const Patch = t.partial({ url: Url, events: Events, description: Description, is_active: t.boolean });
const Params = t.type({ webhook_id: t.string });
const Rotate = t.partial({ grace_period_seconds: jsonInt(0, MAX_GRACE_SECONDS, `integer 0..${MAX_GRACE_SECONDS} (seconds; default ${DEFAULT_GRACE_SECONDS})`) });
const Rotated = t.type({ webhook_id: t.string, secret: t.string, previous_secret_expires_at: t.string });

const TEST_MESSAGE = 'Test event: if you can read this, your endpoint receives webhooks.';

const Count = jsonInt(0, Number.MAX_SAFE_INTEGER, 'integer');
const WebhookView = t.type({ id: t.string, url: t.string, events: t.readonlyArray(t.string), is_active: t.boolean, description: t.string, created_at: t.string });
const TestResult = t.type({
  delivered: t.boolean,
  status_code: t.union([jsonInt(100, 599), t.null]),
  error: t.union([t.string, t.null]),
  latency_ms: Count,
  delivery_id: t.string,
  signature_header: t.string,
});

export const webhookNotFound = refusal(404, 'short', 'Webhook not found');
const secretsDoNotOpen = refusal(503, 'business', "SERVICE_UNAVAILABLE: the subscription's secret does not open with this server's keys", always('Retry-After'));
const unknownEvents = refusal(422, 'business', 'VALIDATION_ERROR: unknown event names (detail.unknown, detail.valid)');

const operations: readonly Operation[] = [
  {
    method: 'post',
    path: '/webhooks',
    summary: 'Subscribe a URL to events (all when `events` is empty or omitted); the secret is shown only here',
    body: Create,
    answers: [answer(201, 'The subscription with its secret', t.intersection([WebhookView, t.type({ secret: t.string })])), unknownEvents, refusal(422, 'business', 'WEBHOOK_LIMIT_REACHED')],
  },
  { method: 'get', path: '/webhooks', summary: "The workspace's subscriptions", answers: [answer(200, 'The subscriptions, without secrets', t.type({ items: t.array(WebhookView) }))] },
  {
    method: 'patch',
    path: '/webhooks/:webhook_id',
    summary: 'Change the fields passed; is_active true also resets consecutive_failures',
    params: Params,
    body: Patch,
    answers: [answer(200, 'The subscription', t.intersection([WebhookView, t.type({ consecutive_failures: Count })])), webhookNotFound, unknownEvents],
  },
  { method: 'delete', path: '/webhooks/:webhook_id', summary: 'Delete a subscription, its delivery history and its scheduled retries', params: Params, answers: [answer(204, 'Deleted'), webhookNotFound] },
  {
    method: 'post',
    path: '/webhooks/:webhook_id/test',
    summary: 'Send one webhook.test delivery now, once, and report how it went',
    params: Params,
    answers: [answer(200, 'The result of the one attempt', TestResult), webhookNotFound, secretsDoNotOpen],
  },
  {
    method: 'post',
    path: '/webhooks/:webhook_id/secret/rotate',
    summary:
      'Replace the signing secret; the new one is shown only here. The replaced one stays valid for the grace period (default 24 h, 0 ends it at once): ' +
      'webhook-signature carries both, X-Webhook-Signature keeps the replaced one until the period ends. A rotation during a grace period ends the older secret at once.',
    params: Params,
    body: Rotate,
    answers: [answer(200, 'The new secret, and when the replaced one stops signing', Rotated), webhookNotFound, secretsDoNotOpen],
  },
];

const testData = (webhookId: string): t.TypeOf<typeof WebhookTestData> => ({ webhook_id: webhookId, message: TEST_MESSAGE });

const view = (id: string, s: Pick<SubscriptionState, 'url' | 'events' | 'isActive' | 'description' | 'createdAt'>): t.TypeOf<typeof WebhookView> => ({
  id,
  url: s.url,
  events: s.events,
  is_active: s.isActive,
  description: s.description,
  created_at: s.createdAt,
});

/** A secret no key of this server opens: its key configuration is wrong, which a restart with the right one fixes. */
const secretUnavailable = () =>
  business(
    domainError('SERVICE_UNAVAILABLE', "This webhook's secret does not open with this server's WEBHOOK_SECRET_KEY or WEBHOOK_PREVIOUS_SECRET_KEYS; retry later"),
    { 'Retry-After': '60' },
  );

const failure = (error: DomainError) => (error.code === 'WEBHOOK_NOT_FOUND' ? notFound('Webhook') : business(error));

export const webhookRoutes = (core: Core, deps: WebhookRouteDeps): RouteModule => {
  const slots = createSubscriptionSlots(core, deps.directory);

  /** Runs a command for the caller's workspace; answers once the directory has seen the result. */
  const run = async (ctx: ApiContext, id: string, command: SubscriptionCommand): Promise<CommandResult<SubscriptionState>> => {
    const result = await runSubscriptionCommand(core, ctx.state.workspace.id, id, command, ctx.state.scope);
    if (result._tag === 'Left') throw failure(result.left);
    const last = result.right.records.at(-1);
    if (last !== undefined) await deps.directory.waitFor(last.position);
    return result.right;
  };

  /** A sealed secret of the subscription in clear; 503 when no key of this server opens it. */
  const opened = (workspaceId: string, id: string, sealed: string): string => {
    try {
      return deps.secrets.decrypt(sealed, secretContext(workspaceId, id));
    } catch {
      throw secretUnavailable();
    }
  };

  /** The subscription as the log holds it now, with its secrets; 404 for another workspace's. */
  const current = async (workspaceId: string, id: string): Promise<{ state: SubscriptionState; secrets: SigningSecrets }> => {
    const { evolve, initial } = subscriptionAggregate(workspaceId);
    const { state } = await loadState(core.log, subscriptionStream(id), evolve, initial);
    if (!state.exists || state.workspaceId !== workspaceId) throw notFound('Webhook');
    const { previousSecret } = state;
    const previous = previousSecret === null || previousSecret.expiresAt <= core.clock() ? null : { ...previousSecret, secret: opened(workspaceId, id, previousSecret.secret) };
    return { state, secrets: { current: opened(workspaceId, id, state.secretEncrypted), previous } };
  };

  return {
    operations,
    api(router) {
      router.post('/webhooks', async (ctx) => {
        const body = decode(Create, ctx.request.body, 'body');
        const workspaceId = ctx.state.workspace.id;
        const id = core.resourceId('webhook', ctx.state.scope);
        const secret = newWebhookSecret();
        await slots.claim(workspaceId, id, ctx.state.scope);
        const { state } = await run(ctx, id, {
          kind: 'create',
          url: body.url,
          events: body.events ?? [],
          description: body.description ?? '',
          secretEncrypted: deps.secrets.encrypt(secret, secretContext(workspaceId, id)),
          at: isoLocal(Math.floor(core.clock() / 1000)),
        }).catch(async (error: unknown) => {
          // Refused (unknown event names): nothing was created. Any other failure may have created it,
          // so its slot stays held; if it was not created, a claim at the limit gives it back later.
          if (error instanceof ApiFailure) await slots.release(workspaceId, id, ctx.state.scope);
          throw error;
        });
        ctx.status = 201;
        // The stored secret, not `secret`: a resumed create (middleware/idempotency.ts) may find the
        // subscription that its interrupted first run created, with that run's secret.
        // The secret in the answer: an Idempotency-Key's record of it is sealed.
        ctx.state.secretAnswer = true;
        ctx.body = { ...view(id, state), secret: opened(workspaceId, id, state.secretEncrypted) };
      });

      router.get('/webhooks', (ctx) => {
        ctx.body = { items: deps.directory.list(ctx.state.workspace.id).map((row) => view(row.id, row)) };
      });

      router.patch('/webhooks/:webhook_id', async (ctx) => {
        const { webhook_id: id } = decode(Params, ctx.params, 'path');
        const body = decode(Patch, ctx.request.body, 'body');
        const { state } = await run(ctx, id, {
          kind: 'update',
          ...(body.url === undefined ? {} : { url: body.url }),
          ...(body.events === undefined ? {} : { events: body.events }),
          ...(body.description === undefined ? {} : { description: body.description }),
          ...(body.is_active === undefined ? {} : { isActive: body.is_active }),
        });
        ctx.body = { ...view(id, state), consecutive_failures: state.consecutiveFailures };
      });

      router.delete('/webhooks/:webhook_id', async (ctx) => {
        const { webhook_id: id } = decode(Params, ctx.params, 'path');
        // The marker first (tailers learn of the deletion and cancel retries), then the slot is given
        // back (a crash before that leaves a claim that a claim at the limit gives back), then the stream goes.
        await run(ctx, id, { kind: 'delete' });
        for (const hook of deps.beforeDeleteAnswered) await hook(id);
        await slots.release(ctx.state.workspace.id, id, ctx.state.scope);
        await core.log.deleteStream(subscriptionStream(id));
        ctx.status = 204;
      });

      router.post('/webhooks/:webhook_id/test', async (ctx) => {
        const { webhook_id: id } = decode(Params, ctx.params, 'path');
        const workspaceId = ctx.state.workspace.id;
        const { state, secrets } = await current(workspaceId, id);
        const envelope = envelopeOf({ id: core.resourceId('event', ctx.state.scope), type: WEBHOOK_TEST_EVENT, micros: core.clock(), workspaceId, data: testData(id) });
        const body = Buffer.from(JSON.stringify(envelope));
        const deliveryId = core.resourceId('delivery', ctx.state.scope);
        const signature = signatureHeaders(secrets, deliveryId, core.clock(), body).contract;
        const outcome = await deps.sender.send({ url: state.url, body, eventType: WEBHOOK_TEST_EVENT, deliveryId, attempt: 1, secrets });
        const result: t.TypeOf<typeof TestResult> = {
          delivered: outcome.delivered,
          status_code: outcome.statusCode,
          error: outcome.error,
          latency_ms: outcome.latencyMs,
          delivery_id: deliveryId,
          signature_header: signature,
        };
        ctx.body = result;
      });

      router.post('/webhooks/:webhook_id/secret/rotate', async (ctx) => {
        const { webhook_id: id } = decode(Params, ctx.params, 'path');
        const body = decode(Rotate, ctx.request.body ?? {}, 'body');
        const workspaceId = ctx.state.workspace.id;
        const { state } = await run(ctx, id, {
          kind: 'rotate_secret',
          secretEncrypted: deps.secrets.encrypt(newWebhookSecret(), secretContext(workspaceId, id)),
          graceSeconds: body.grace_period_seconds ?? DEFAULT_GRACE_SECONDS,
          at: core.clock(),
        });
        // From the state, not the secret made above: a resumed rotation (middleware/idempotency.ts)
        // answers the secret its first run wrote.
        const result: t.TypeOf<typeof Rotated> = {
          webhook_id: id,
          secret: opened(workspaceId, id, state.secretEncrypted),
          previous_secret_expires_at: isoLocal(Math.floor((state.previousSecret?.expiresAt ?? 0) / 1000)),
        };
        ctx.state.secretAnswer = true;
        ctx.body = result;
      });
    },
  };
};
