// What the dispatcher's integration specs over a real log share: one subscription created in the log
// and a fixed directory that has it (the specs decide what the directory sees), and the dispatcher's
// dependencies with a sender that records each request and answers 200 at once; deliveries and
// replays recorded in the log as a dispatcher (or an older release of one) records them.
import { deliveryAggregate, packSteps, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';
import { deliveryStream, recordedEventId } from '../../src/domain/delivery/ids.js';
import { foldReplay, replayAggregate, replayEventId, replayStream, type Replay } from '../../src/domain/replay/replay.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import type { SqliteEventLog } from '../../src/log/sqlite.js';
import { SUBSCRIPTION_EVENTS, subscriptionStream } from '../../src/domain/subscription/subscription.js';
import type { createDispatcher } from '../../src/webhooks/dispatch/dispatcher.js';
import { createMemoryRetrySchedule } from '../../src/webhooks/dispatch/retry-schedule/memory.js';
import type { DeliveryRequest } from '../../src/webhooks/sender.js';
import type { SubscriptionDirectory, SubscriptionRow } from '../../src/webhooks/subscriptions.js';

export type DispatcherDeps = Parameters<typeof createDispatcher>[0];

/** Appends the subscriptions' creations; the directory has them while `visible()` says so. */
export const subscriptionsOf = async (log: SqliteEventLog, workspaceId: string, subscriptionIds: readonly string[], visible: () => boolean = () => true): Promise<SubscriptionDirectory> => {
  const rows: SubscriptionRow[] = [];
  for (const id of subscriptionIds) {
    // One creation event id per subscription id.
    const { records } = await log.append(subscriptionStream(id), [{ id: `c${id.slice(1)}`, type: SUBSCRIPTION_EVENTS.created, workspaceId, data: {} }], 'no_stream');
    rows.push({
      id,
      workspaceId,
      url: 'http://127.0.0.1:9/hook',
      events: [],
      isActive: true,
      description: '',
      createdAt: new Date().toISOString(),
      createdPosition: (records[0] as RecordedEvent).position,
      consecutiveFailures: 0,
      secrets: { current: 'whsec_test', previous: null },
      sealedSecret: '',
      revision: 0,
    });
  }
  const seen = (ws: string): SubscriptionRow[] => (ws === workspaceId && visible() ? rows : []);
  return {
    get: (ws, id) => seen(ws).find((row) => row.id === id),
    workspaceOf: (id) => (rows.some((row) => row.id === id) ? workspaceId : undefined),
    matching: (ws) => (ws === workspaceId ? rows : []),
    list: (ws) => (ws === workspaceId ? rows : []),
    waitFor: async () => undefined,
  };
};

/** One subscription: subscriptionsOf with one id. */
export const oneSubscription = (log: SqliteEventLog, workspaceId: string, subscriptionId: string, visible: () => boolean = () => true): Promise<SubscriptionDirectory> =>
  subscriptionsOf(log, workspaceId, [subscriptionId], visible);

/** A dispatcher's dependencies on `log` with an own memory schedule; what it sends is pushed to `sent`. */
export const recordingDeps = (log: SqliteEventLog, subscriptions: SubscriptionDirectory, sent: DeliveryRequest[]): DispatcherDeps => ({
  log,
  subscriptions,
  sender: { send: async (request: DeliveryRequest) => (sent.push(request), { delivered: true, statusCode: 200, error: null, latencyMs: 1 }), close: async () => undefined } as never,
  schedule: { own: createMemoryRetrySchedule() },
  report: async () => undefined,
  clock: () => Date.now() * 1000,
  retryDelaysMs: [50, 50],
  maxInFlight: 8,
  maxInFlightPerSubscription: 4,
  maxInFlightPerWorkspace: 8,
});

/** The `n`th public event of the workspace (a ticket's creation), as the bus hands it over. */
export const appendPublicEvent = async (log: SqliteEventLog, workspaceId: string, n: number): Promise<RecordedEvent> => {
  const { records } = await log.append(`ticket-${n}`, [{ id: `${'e'.repeat(31)}${n}`, type: 'ticket.created', workspaceId, data: { ticket_id: `t${n}` } }], 'no_stream');
  return records[0] as RecordedEvent;
};

/** Records a delivery of `event` under `deliveryId` as a dispatcher does (scheduled; attempted and delivered if `delivered`, failed for good if `failed`). */
export const recordDelivery = async (
  log: SqliteEventLog,
  event: RecordedEvent,
  delivery: { readonly subscriptionId: string; readonly deliveryId: string; readonly fannedOutThrough: number; readonly delivered: boolean; readonly failed?: boolean; readonly replayId?: string },
): Promise<void> => {
  const at = Date.now() * 1000;
  const commands: DeliveryCommand[] = [
    { kind: 'schedule', deliveryId: delivery.deliveryId, subscriptionId: delivery.subscriptionId, eventId: event.id, eventType: event.type, eventPosition: event.position, fannedOutThrough: delivery.fannedOutThrough, ...(delivery.replayId === undefined ? {} : { replayId: delivery.replayId }), at },
    ...(delivery.delivered || delivery.failed === true
      ? [{ kind: 'record_attempt', attempt: 1, outcome: { delivered: delivery.delivered, statusCode: delivery.delivered ? 200 : 500, error: delivery.delivered ? null : 'http 500', latencyMs: 1 }, at, retryDelaysMs: [] } as const]
      : []),
  ];
  let state = deliveryAggregate.initial;
  const steps = commands.flatMap((command) => {
    const decided = deliveryAggregate.decide(command, state);
    if (decided._tag === 'Left') throw new Error(decided.left.message);
    state = decided.right.reduce(deliveryAggregate.evolve, state);
    return decided.right;
  });
  await log.append(deliveryStream(delivery.subscriptionId), [{ id: recordedEventId(steps), workspaceId: event.workspaceId, ...packSteps(steps) }], 'any');
};

/** `count` public events of the workspace (streams ticket-0 …), then a replay of all of them requested in the log (in its own stream unless `stream` says, as an older release's). */
export const requestReplay = async (
  log: SqliteEventLog,
  workspaceId: string,
  subscriptionId: string,
  replayId: string,
  count: number,
  options: { readonly onlyFailed?: boolean; readonly stream?: string } = {},
): Promise<Replay> => {
  for (let i = 0; i < count; i++) await log.append(`ticket-${i}`, [{ id: String(i).padStart(32, 'e'), type: 'ticket.created', workspaceId, data: { ticket_id: `t${i}` } }], 'no_stream');
  const request = { kind: 'request', replayId, at: Date.now() * 1000, subscriptionId, since: 0, until: null, throughPosition: await log.headPosition(), types: [], onlyFailed: options.onlyFailed ?? false } as const;
  const decided = replayAggregate.decide(request, replayAggregate.initial);
  if (decided._tag === 'Left') throw new Error(decided.left.message);
  await log.append(options.stream ?? replayStream(replayId), decided.right.map((step) => ({ id: replayEventId(step), type: step.type, workspaceId, data: step.data })), 'any');
  return currentReplay(log, replayId, options.stream);
};

/** The replay as its stream has it (its own by default). */
export const currentReplay = async (log: SqliteEventLog, replayId: string, stream = replayStream(replayId)): Promise<Replay> =>
  foldReplay(await log.readStream(stream), replayId) as Replay;
