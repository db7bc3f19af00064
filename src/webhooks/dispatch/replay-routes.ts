// History replay (beyond the contract): POST /webhooks/{id}/replay records a replay request in the
// subscription's replay stream for the dispatchers (replay-runner.ts), with its range fixed now (the
// log's head); GET /webhooks/{id}/replays/{replay_id} shows its progress: matched as the driver
// recorded it, sent (attempted), delivered and failed from the delivery-history index.
import * as t from 'io-ts';
import type { Core } from '../../app/core.js';
import { isoMicros } from '../../domain/envelope.js';
import { domainError } from '../../domain/errors.js';
import { replayAggregate, replayStream, type Replay } from '../../domain/replay/replay.js';
import { business, invalid, notFound } from '../../http/api-error.js';
import type { RouteModule } from '../../http/app.js';
import type { ApiContext } from '../../http/context.js';
import { answer, refusal, type Operation } from '../../http/operations.js';
import { decode, jsonInt, text } from '../../http/validation.js';
import type { DeliveryHistoryReader } from '../../../projections/deliveries-index.js';
import { webhookNotFound } from '../routes.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../subscriptions.js';
import { findReplay } from './replay-records.js';
import { instant, webhookOfPath } from './routes.js';

/** A point of the range: a public event offset (µs, as /updates gives them), or an ISO 8601 instant. */
const Point = t.union([jsonInt(0, Number.MAX_SAFE_INTEGER, 'offset (µs)'), instant]);
const ReplayRequest = t.intersection([
  t.type({ since: Point }),
  t.partial({ until: Point, types: t.array(text(100), 'array of event names'), only_failed: t.boolean }),
]);

const nullableStr = t.union([t.string, t.null]);
const ReplayView = t.type({
  id: t.string,
  webhook_id: t.string,
  status: t.keyof({ running: null, completed: null, cancelled: null }),
  since: t.number,
  until: t.union([t.number, t.null]),
  types: t.array(t.string),
  only_failed: t.boolean,
  matched: t.number,
  sent: t.number,
  delivered: t.number,
  failed: t.number,
  created_at: t.string,
  finished_at: nullableStr,
  cancel_reason: nullableStr,
});

const replayNotFound = refusal(404, 'short', 'Webhook or replay not found');

const operations: readonly Operation[] = [
  {
    method: 'post',
    path: '/webhooks/:webhook_id/replay',
    summary:
      "Send the workspace's events again to this webhook: those with offset from `since` to `until` (offsets in µs or ISO 8601 instants; without `until`, up to now), " +
      'of `types` (default: the webhook\'s own), or with only_failed those whose delivery ended failed. Each gets a delivery id of its own, the same body and the normal headers and retries.',
    body: ReplayRequest,
    answers: [
      answer(202, 'The replay, running', ReplayView),
      webhookNotFound,
      refusal(409, 'business', 'CONFLICT: the webhook is inactive'),
      refusal(422, 'business', 'VALIDATION_ERROR: unknown event names (detail.unknown, detail.valid)'),
    ],
  },
  {
    method: 'get',
    path: '/webhooks/:webhook_id/replays/:replay_id',
    summary: "A replay's progress: events matched, deliveries sent, delivered and failed",
    answers: [answer(200, 'The replay', ReplayView), replayNotFound],
  },
];

const viewOf = async (replay: Replay, history: DeliveryHistoryReader): Promise<t.TypeOf<typeof ReplayView>> => {
  const outcomes = await history.replayOutcomes(replay.subscriptionId, replay.id);
  return {
    id: replay.id,
    webhook_id: replay.subscriptionId,
    status: replay.status,
    since: replay.since,
    until: replay.until,
    types: [...replay.types],
    only_failed: replay.onlyFailed,
    matched: replay.matched,
    sent: outcomes.attempted,
    delivered: outcomes.delivered,
    failed: outcomes.failed,
    created_at: isoMicros(replay.requestedAt),
    finished_at: replay.finishedAt === null ? null : isoMicros(replay.finishedAt),
    cancel_reason: replay.reason,
  };
};

export const replayRoutes = (core: Core, deps: { history: DeliveryHistoryReader; subscriptions: SubscriptionDirectory }): RouteModule => {
  const subscriptionOf = (ctx: ApiContext): SubscriptionRow => webhookOfPath(deps.subscriptions, ctx);

  return {
    operations,
    api(router) {
      router.post('/webhooks/:webhook_id/replay', async (ctx) => {
        const body = decode(ReplayRequest, ctx.request.body, 'body');
        const subscription = subscriptionOf(ctx);
        if (body.until !== undefined && body.until < body.since) throw invalid([{ type: 'value_error', loc: ['body', 'until'], msg: 'until should not be before since' }]);
        if (!subscription.isActive) throw business(domainError('CONFLICT', 'Webhook is inactive: activate it first', { webhook_id: subscription.id }));
        const replayId = core.resourceId('replay', ctx.state.scope);
        const result = await core.handle(replayAggregate, replayStream(replayId), subscription.workspaceId, {
          kind: 'request',
          replayId,
          subscriptionId: subscription.id,
          since: body.since,
          until: body.until ?? null,
          // Fixed now: events recorded after the request are the live fan-out's, never replayed.
          throughPosition: await core.log.headPosition(),
          types: body.types ?? subscription.events,
          onlyFailed: body.only_failed ?? false,
          at: core.clock(),
        }, ctx.state.scope);
        if (result._tag === 'Left') throw business(result.left);
        const replay = result.right.state;
        if (replay === null) throw new Error(`replay ${replayId} not recorded`);
        ctx.status = 202;
        ctx.body = await viewOf(replay, deps.history);
      });

      router.get('/webhooks/:webhook_id/replays/:replay_id', async (ctx) => {
        const subscription = subscriptionOf(ctx);
        const found = await findReplay(core.log, subscription.id, String(ctx.params['replay_id']));
        if (found === undefined) throw notFound('Replay');
        ctx.body = await viewOf(found.replay, deps.history);
      });
    },
  };
};
