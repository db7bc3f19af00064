// The subscription read model (rows with decrypted secrets, in memory only, rebuilt from the log at
// start) and the one entry point for subscription commands. The delivery engine reads rows through
// SubscriptionDirectory and reports delivery outcomes with runSubscriptionCommand.
import type { Core } from '../app/core.js';
import { createProjectionRunner } from '../app/projection-runner.js';
import {
  SUBSCRIPTION_EVENTS,
  SUBSCRIPTION_EVENT_TYPES,
  evolveSubscription,
  initialSubscription,
  subscriptionAggregate,
  subscriptionStream,
  type SubscriptionCommand,
  type SubscriptionState,
} from '../domain/subscription/subscription.js';
import type { EventLog, RecordedEvent } from '../log/event-log.js';
import type { SecretBox } from './secrets.js';

export interface SubscriptionRow {
  readonly id: string;
  readonly workspaceId: string;
  readonly url: string;
  /** Empty means all events. */
  readonly events: readonly string[];
  readonly isActive: boolean;
  readonly description: string;
  readonly createdAt: string;
  /** Global log position of the creation event: deliver only events after it. */
  readonly createdPosition: number;
  readonly consecutiveFailures: number;
  /** Decrypted, in memory only. */
  readonly secret: string;
}

export interface SubscriptionDirectory {
  get(workspaceId: string, id: string): SubscriptionRow | undefined;
  /** The workspace of a subscription that exists (the retry schedule knows subscriptions only by id). */
  workspaceOf(id: string): string | undefined;
  /** Active subscriptions of the workspace whose filter takes `type`, in creation order. */
  matching(workspaceId: string, type: string): SubscriptionRow[];
  /** All the workspace's subscriptions, active or not, in creation order. */
  list(workspaceId: string): SubscriptionRow[];
  /** Resolves once the directory has applied every event up to `position`. */
  waitFor(position: number): Promise<void>;
}

export interface SubscriptionReadModel extends SubscriptionDirectory {
  /** Called when a subscription's deletion marker is applied (before its stream is removed). */
  onDeleted(listener: (row: SubscriptionRow) => void): void;
  start(): Promise<void>;
  stop(): Promise<void>;
}

const STREAM_PREFIX = subscriptionStream('');

/** Additional authenticated data of a sealed secret: it only opens for its own subscription. */
export const secretContext = (workspaceId: string, subscriptionId: string): string => `webhook/${workspaceId}/${subscriptionId}`;

export const runSubscriptionCommand = (core: Core, workspaceId: string, subscriptionId: string, command: SubscriptionCommand) =>
  core.handle(subscriptionAggregate(workspaceId), subscriptionStream(subscriptionId), workspaceId, command);

const rowOf = (id: string, state: SubscriptionState, createdPosition: number, secret: string): SubscriptionRow => ({
  id,
  workspaceId: state.workspaceId,
  url: state.url,
  events: state.events,
  isActive: state.isActive,
  description: state.description,
  createdAt: state.createdAt,
  createdPosition,
  consecutiveFailures: state.consecutiveFailures,
  secret,
});

export const createSubscriptionDirectory = (log: EventLog, secrets: SecretBox): SubscriptionReadModel => {
  const states = new Map<string, { state: SubscriptionState; createdPosition: number; secret: string }>();
  const byWorkspace = new Map<string, Map<string, SubscriptionRow>>();
  const deletedListeners: ((row: SubscriptionRow) => void)[] = [];

  const rowsOf = (workspaceId: string): SubscriptionRow[] => [...(byWorkspace.get(workspaceId)?.values() ?? [])];

  const apply = (event: RecordedEvent): void => {
    if (!event.stream.startsWith(STREAM_PREFIX)) return;
    const id = event.stream.slice(STREAM_PREFIX.length);
    const known = states.get(id);
    if (known === undefined && event.type !== SUBSCRIPTION_EVENTS.created) return;
    const state = evolveSubscription(known?.state ?? initialSubscription, event);
    const createdPosition = known?.createdPosition ?? event.position;
    let secret = known?.secret;
    if (secret === undefined) {
      try {
        secret = secrets.decrypt(state.secretEncrypted, secretContext(state.workspaceId, id));
      } catch (error) {
        // A wrong server key must not stop every other subscription: this one stays unknown.
        console.error(`webhook ${id}: its secret does not decrypt with this server key (${(error as Error).message}); skipped`);
        return;
      }
    }
    const rows = byWorkspace.get(state.workspaceId) ?? new Map<string, SubscriptionRow>();
    byWorkspace.set(state.workspaceId, rows);
    const row = rowOf(id, state, createdPosition, secret);
    if (state.deleted) {
      states.delete(id);
      rows.delete(id);
      deletedListeners.forEach((listener) => listener(row));
      return;
    }
    states.set(id, { state, createdPosition, secret });
    rows.set(id, row);
  };

  const runner = createProjectionRunner(log, { name: 'webhook-subscriptions', types: SUBSCRIPTION_EVENT_TYPES, checkpoint: () => 0, apply });

  return {
    get: (workspaceId, id) => byWorkspace.get(workspaceId)?.get(id),
    workspaceOf: (id) => states.get(id)?.state.workspaceId,
    matching: (workspaceId, type) => rowsOf(workspaceId).filter((row) => row.isActive && (row.events.length === 0 || row.events.includes(type))),
    list: rowsOf,
    waitFor: runner.waitFor,
    onDeleted(listener) {
      deletedListeners.push(listener);
    },
    async start() {
      await runner.start();
      await runner.waitFor(await log.headPosition());
    },
    stop: runner.stop,
  };
};
