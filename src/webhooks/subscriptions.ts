// The subscription read model (rows with decrypted secrets, in memory only, rebuilt from the log at
// start) and the one entry point for subscription commands. The delivery engine reads rows through
// SubscriptionDirectory and reports delivery outcomes with runSubscriptionCommand.
//
// Start-up stops when a secret in the log does not open with any key of the server's keyring: the
// key is misconfigured, and every delivery and test of that subscription would fail. A secret that
// arrives live and does not open (written by a misconfigured process) is logged, and the subscription
// stays unknown here; it is opened once a process that holds its key seals it again.
import type { RequestScope } from '../app/request-scope.js';
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
import { SLOT_EVENTS } from '../domain/subscription/slots.js';
import type { EventLog, RecordedEvent } from '../log/event-log.js';
import { systemMicros, type MicrosClock } from '../log/clock.js';
import type { SecretBox } from './secrets.js';
import type { SigningSecrets } from './signature.js';

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
  readonly secrets: SigningSecrets;
  /** The current secret as the log holds it, sealed: tells whether a rotation is applied here yet. */
  readonly sealedSecret: string;
  /** The revision of the subscription's stream this row is as of: the engine reads only what came after. */
  readonly revision: number;
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

/** A subscription's secrets, in clear and sealed as the log holds them now (the previous one while in its grace period). */
export interface SealedSecret {
  readonly workspaceId: string;
  readonly id: string;
  readonly secrets: SigningSecrets;
  readonly sealed: string;
  readonly sealedPrevious: string | null;
}

export interface SubscriptionReadModel extends SubscriptionDirectory {
  /** Called when a subscription's deletion marker is applied (before its stream is removed). */
  onDeleted(listener: (row: SubscriptionRow) => void): void;
  /** Every subscription whose secrets opened. */
  secrets(): SealedSecret[];
  /** Catches up with the log; rejects with `refuse(count)` when that many subscriptions' secrets do not open. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

const STREAM_PREFIX = subscriptionStream('');

/** Additional authenticated data of a sealed secret: it only opens for its own subscription. */
export const secretContext = (workspaceId: string, subscriptionId: string): string => `webhook/${workspaceId}/${subscriptionId}`;

export const runSubscriptionCommand = (core: Core, workspaceId: string, subscriptionId: string, command: SubscriptionCommand, scope: RequestScope | undefined) =>
  core.handle(subscriptionAggregate(workspaceId), subscriptionStream(subscriptionId), workspaceId, command, scope);

const rowOf = (id: string, state: SubscriptionState, createdPosition: number, secrets: SigningSecrets, revision: number): SubscriptionRow => ({
  id,
  workspaceId: state.workspaceId,
  url: state.url,
  events: state.events,
  isActive: state.isActive,
  description: state.description,
  createdAt: state.createdAt,
  createdPosition,
  consecutiveFailures: state.consecutiveFailures,
  secrets,
  sealedSecret: state.secretEncrypted,
  revision,
});

interface Entry {
  readonly state: SubscriptionState;
  readonly createdPosition: number;
  /** Null while no key of the ring opens the sealed secrets. */
  readonly secrets: SigningSecrets | null;
}

const sameSealed = (a: SubscriptionState, b: SubscriptionState): boolean =>
  a.secretEncrypted === b.secretEncrypted && a.previousSecret?.secret === b.previousSecret?.secret;

/**
 * `refuse` makes the error start() rejects with when secrets in the log do not open (the caller knows
 * which configuration to name).
 */
export const createSubscriptionDirectory = (log: EventLog, secrets: SecretBox, refuse: (unopened: number) => Error, clock: MicrosClock = systemMicros): SubscriptionReadModel => {
  const states = new Map<string, Entry>();
  const byWorkspace = new Map<string, Map<string, SubscriptionRow>>();
  const deletedListeners: ((row: SubscriptionRow) => void)[] = [];
  let live = false;

  const rowsOf = (workspaceId: string): SubscriptionRow[] => [...(byWorkspace.get(workspaceId)?.values() ?? [])];

  /** A previous secret whose grace period is over is not opened: its key may be gone from the ring. */
  const open = (id: string, state: SubscriptionState): SigningSecrets | null => {
    const context = secretContext(state.workspaceId, id);
    const { previousSecret } = state;
    try {
      return {
        current: secrets.decrypt(state.secretEncrypted, context),
        previous: previousSecret === null || previousSecret.expiresAt <= clock() ? null : { ...previousSecret, secret: secrets.decrypt(previousSecret.secret, context) },
      };
    } catch (error) {
      // Before start has caught up, start-up fails on these and says why once.
      if (live) console.error(`webhook ${id}: skipped, its secret does not open (${(error as Error).message})`);
      return null;
    }
  };

  const forget = (id: string, workspaceId: string): void => {
    const row = byWorkspace.get(workspaceId)?.get(id);
    states.delete(id);
    byWorkspace.get(workspaceId)?.delete(id);
    if (row !== undefined) deletedListeners.forEach((listener) => listener(row));
  };

  const apply = (event: RecordedEvent): void => {
    // A DELETE appends the deletion marker, gives the slot back, then deletes the stream, marker
    // included: a process tailing a shared log can read after the marker is gone. The slot's release
    // stays in the log, and no live subscription holds a released slot.
    if (event.type === SLOT_EVENTS.released) {
      const id = String(event.data['subscription_id']);
      const known = states.get(id);
      if (known !== undefined) forget(id, known.state.workspaceId);
      return;
    }
    if (!event.stream.startsWith(STREAM_PREFIX)) return;
    const id = event.stream.slice(STREAM_PREFIX.length);
    const known = states.get(id);
    if (known === undefined && event.type !== SUBSCRIPTION_EVENTS.created) return;
    const state = evolveSubscription(known?.state ?? initialSubscription, event);
    const createdPosition = known?.createdPosition ?? event.position;
    // Opened once, and again when a rotation changes them; a reseal changes only how they are
    // sealed, so what opened stays open (this process may not hold the key that sealed them again).
    const resealed = event.type === SUBSCRIPTION_EVENTS.secretResealed && known !== undefined && known.secrets !== null;
    const opened = known !== undefined && (resealed || sameSealed(known.state, state)) ? known.secrets : open(id, state);
    const rows = byWorkspace.get(state.workspaceId) ?? new Map<string, SubscriptionRow>();
    byWorkspace.set(state.workspaceId, rows);
    if (state.deleted) return forget(id, state.workspaceId);
    states.set(id, { state, createdPosition, secrets: opened });
    // Rotated secrets that do not open here leave the ones opened before in use (valid during the
    // grace period): a subscription that left the directory would read as deleted to the engine.
    const usable = opened ?? rows.get(id)?.secrets;
    if (usable !== undefined) rows.set(id, rowOf(id, state, createdPosition, usable, event.revision));
  };

  const runner = createProjectionRunner(log, { name: 'webhook-subscriptions', types: [...SUBSCRIPTION_EVENT_TYPES, SLOT_EVENTS.released], checkpoint: () => 0, apply });

  return {
    get: (workspaceId, id) => byWorkspace.get(workspaceId)?.get(id),
    workspaceOf: (id) => {
      const workspaceId = states.get(id)?.state.workspaceId;
      return workspaceId !== undefined && byWorkspace.get(workspaceId)?.has(id) === true ? workspaceId : undefined;
    },
    matching: (workspaceId, type) => rowsOf(workspaceId).filter((row) => row.isActive && (row.events.length === 0 || row.events.includes(type))),
    list: rowsOf,
    waitFor: runner.waitFor,
    onDeleted(listener) {
      deletedListeners.push(listener);
    },
    secrets: () =>
      [...states].flatMap(([id, { state, secrets: opened }]) =>
        opened === null
          ? []
          : [{ workspaceId: state.workspaceId, id, secrets: opened, sealed: state.secretEncrypted, sealedPrevious: opened.previous === null ? null : (state.previousSecret?.secret ?? null) }],
      ),
    async start() {
      await runner.start();
      await runner.waitFor(await log.headPosition());
      const unopened = [...states.values()].filter((entry) => entry.secrets === null).length;
      if (unopened > 0) {
        await runner.stop();
        throw refuse(unopened);
      }
      live = true;
    },
    stop: runner.stop,
  };
};
