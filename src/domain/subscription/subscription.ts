// The webhook subscription aggregate: target, event filter, active flag and the run of consecutive
// failed deliveries (spec "States and transitions: Webhook subscription"). All its events are
// internal; the secret is only ever held here encrypted (sealed again when the server key rotates).
// A secret rotation keeps the replaced secret valid for a grace period: at most two secrets are valid
// at once, so a rotation during another's grace period ends that older secret at once.
import { left, right } from 'fp-ts/lib/Either.js';
import * as t from 'io-ts';
import type { Aggregate, Decided } from '../aggregate.js';
import { domainError } from '../errors.js';
import { PUBLIC_EVENT_TYPES, isPublicEventType } from '../event-types.js';

/** The 5th failed delivery in a row deactivates the subscription. */
export const AUTO_DISABLE_AFTER = 5;
/** A rotation's grace period when none is asked for: 24 hours, in seconds. */
export const DEFAULT_GRACE_SECONDS = 24 * 3600;
/** The longest grace period a rotation may ask for: 7 days, in seconds. */
export const MAX_GRACE_SECONDS = 7 * 24 * 3600;
/** How many recent delivery rounds a subscription remembers, so a repeated report counts once. */
const REMEMBERED_DELIVERIES = 64;

/**
 * What a report is remembered by: the delivery and its round (a manual retry is a new round of the
 * same delivery, whose outcome counts again). Events written before rounds were recorded are round 1.
 */
const reportKey = (deliveryId: string, round: number): string => `${deliveryId}#${round}`;

export const SUBSCRIPTION_EVENTS = {
  created: 'webhook.subscription_created',
  updated: 'webhook.subscription_updated',
  activated: 'webhook.subscription_activated',
  deactivated: 'webhook.subscription_deactivated',
  failureCounted: 'webhook.subscription_failure_counted',
  failuresReset: 'webhook.subscription_failures_reset',
  /** The same secret sealed with the server's current key (src/webhooks/secrets.ts). */
  secretResealed: 'webhook.subscription_secret_resealed',
  /** A new secret; the one it replaces stays valid until `previous_expires_at`. */
  secretRotated: 'webhook.subscription_secret_rotated',
  /** Appended just before the stream is deleted, so tailers learn of the deletion. */
  deleted: 'webhook.subscription_deleted',
  /** Ends a stream that a create claimed a slot for and never started (domain/subscription/slots.ts): that create can no longer land. */
  abandoned: 'webhook.subscription_abandoned',
} as const;

export const SUBSCRIPTION_EVENT_TYPES: readonly string[] = Object.values(SUBSCRIPTION_EVENTS);

export const subscriptionStream = (subscriptionId: string): string => `webhook-${subscriptionId}`;

/** The event only the test endpoint sends; it is not in the catalogue, so nobody subscribes to it. */
export const WEBHOOK_TEST_EVENT = 'webhook.test';

/** The `data` of webhook.test. */
export const WebhookTestData = t.type({ webhook_id: t.string, message: t.string });

export interface SubscriptionState {
  readonly exists: boolean;
  readonly workspaceId: string;
  /** The deletion marker is written; only the stream removal may be left to do. */
  readonly deleted: boolean;
  readonly url: string;
  /** Empty means all events. */
  readonly events: readonly string[];
  readonly description: string;
  readonly isActive: boolean;
  readonly consecutiveFailures: number;
  readonly secretEncrypted: string;
  /** The secret the last rotation replaced, sealed, and until when it is valid (µs since the epoch). */
  readonly previousSecret: PreviousSecret | null;
  readonly createdAt: string;
  readonly recentDeliveries: readonly string[];
}

/** The secret a rotation replaced (sealed in the state, in clear where deliveries are signed) and the end of its grace period (µs since the epoch). */
export interface PreviousSecret<S = string> {
  readonly secret: S;
  readonly expiresAt: number;
}

export type SubscriptionCommand =
  | { readonly kind: 'create'; readonly url: string; readonly events: readonly string[]; readonly description: string; readonly secretEncrypted: string; readonly at: string }
  | { readonly kind: 'update'; readonly url?: string; readonly events?: readonly string[]; readonly description?: string; readonly isActive?: boolean }
  | { readonly kind: 'record_delivery_failed'; readonly deliveryId: string; readonly round: number }
  | { readonly kind: 'record_delivery_succeeded'; readonly deliveryId: string; readonly round: number }
  | { readonly kind: 'delete' }
  | { readonly kind: 'abandon' }
  /** `at` µs since the epoch; the grace period (seconds) is checked at the edge (0 ends the replaced secret at once). */
  | { readonly kind: 'rotate_secret'; readonly secretEncrypted: string; readonly graceSeconds: number; readonly at: number }
  /**
   * `from` is the sealed secret the issuer read: another process that resealed it first makes this a
   * no-op. `previous` reseals the secret a rotation replaced, in the same event.
   */
  | { readonly kind: 'reseal'; readonly from: string; readonly to: string; readonly previous?: { readonly from: string; readonly to: string } };

const initial: SubscriptionState = {
  exists: false,
  workspaceId: '',
  deleted: false,
  url: '',
  events: [],
  description: '',
  isActive: false,
  consecutiveFailures: 0,
  secretEncrypted: '',
  previousSecret: null,
  createdAt: '',
  recentDeliveries: [],
};

const strings = (value: unknown): string[] => (Array.isArray(value) ? value.map(String) : []);

const remember = (state: SubscriptionState, data: Readonly<Record<string, unknown>>): readonly string[] =>
  typeof data['delivery_id'] === 'string'
    ? [...state.recentDeliveries, reportKey(data['delivery_id'], typeof data['round'] === 'number' ? data['round'] : 1)].slice(-REMEMBERED_DELIVERIES)
    : state.recentDeliveries;

const evolve: Aggregate<SubscriptionState, SubscriptionCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case SUBSCRIPTION_EVENTS.created:
      return {
        ...initial,
        exists: true,
        workspaceId: String(data['workspace_id']),
        isActive: true,
        url: String(data['url']),
        events: strings(data['events']),
        description: String(data['description']),
        secretEncrypted: String(data['secret_encrypted']),
        createdAt: String(data['created_at']),
      };
    case SUBSCRIPTION_EVENTS.updated:
      return {
        ...state,
        ...('url' in data ? { url: String(data['url']) } : {}),
        ...('events' in data ? { events: strings(data['events']) } : {}),
        ...('description' in data ? { description: String(data['description']) } : {}),
      };
    case SUBSCRIPTION_EVENTS.activated:
      return { ...state, isActive: true, consecutiveFailures: 0 };
    case SUBSCRIPTION_EVENTS.deactivated:
      return { ...state, isActive: false };
    case SUBSCRIPTION_EVENTS.failureCounted:
      return { ...state, consecutiveFailures: Number(data['consecutive_failures']), recentDeliveries: remember(state, data) };
    case SUBSCRIPTION_EVENTS.failuresReset:
      return { ...state, consecutiveFailures: 0, recentDeliveries: remember(state, data) };
    case SUBSCRIPTION_EVENTS.secretResealed:
      return {
        ...state,
        secretEncrypted: String(data['secret_encrypted']),
        ...(state.previousSecret !== null && 'previous_secret_encrypted' in data
          ? { previousSecret: { ...state.previousSecret, secret: String(data['previous_secret_encrypted']) } }
          : {}),
      };
    // The replaced secret becomes the previous one; an older previous secret is dropped.
    case SUBSCRIPTION_EVENTS.secretRotated:
      return {
        ...state,
        secretEncrypted: String(data['secret_encrypted']),
        previousSecret: { secret: state.secretEncrypted, expiresAt: Number(data['previous_expires_at']) },
      };
    case SUBSCRIPTION_EVENTS.deleted:
      return { ...state, exists: false, deleted: true, isActive: false };
    // Owned by no workspace: every command but a create finds nothing, and a create finds it taken.
    case SUBSCRIPTION_EVENTS.abandoned:
      return { ...state, deleted: true };
    default:
      return state;
  }
};

/** Empty or omitted `events` means all; unknown names are refused with the catalogue (rule 2). */
const checkEvents = (events: readonly string[]) => {
  const unknown = [...new Set(events.filter((name) => !isPublicEventType(name)))];
  if (unknown.length === 0) return right([...new Set(events)]);
  return left(domainError('VALIDATION_ERROR', 'Unknown webhook event name', { unknown, valid: [...PUBLIC_EVENT_TYPES] }));
};

const notFound = () => left(domainError('WEBHOOK_NOT_FOUND', 'Webhook not found'));

const decideUpdate = (command: Extract<SubscriptionCommand, { kind: 'update' }>, state: SubscriptionState) => {
  const checked = command.events === undefined ? right(undefined) : checkEvents(command.events);
  if (checked._tag === 'Left') return checked;
  const changes = {
    ...(command.url === undefined ? {} : { url: command.url }),
    ...(checked.right === undefined ? {} : { events: checked.right }),
    ...(command.description === undefined ? {} : { description: command.description }),
  };
  const decided: Decided[] = Object.keys(changes).length === 0 ? [] : [{ type: SUBSCRIPTION_EVENTS.updated, data: changes }];
  if (command.isActive === true && !state.isActive) decided.push({ type: SUBSCRIPTION_EVENTS.activated, data: {} });
  // Rule 4: is_active true resets the counter even when the subscription is already active.
  else if (command.isActive === true && state.consecutiveFailures > 0) decided.push({ type: SUBSCRIPTION_EVENTS.failuresReset, data: { delivery_id: null } });
  if (command.isActive === false && state.isActive) decided.push({ type: SUBSCRIPTION_EVENTS.deactivated, data: { reason: 'manual' } });
  return right(decided);
};

const decideFor = (workspaceId: string): Aggregate<SubscriptionState, SubscriptionCommand>['decide'] => (command, state) => {
  if (command.kind === 'create') {
    if (state.exists || state.deleted) return left(domainError('CONFLICT', 'Webhook already exists'));
    const events = checkEvents(command.events);
    if (events._tag === 'Left') return events;
    const { url, description, secretEncrypted, at } = command;
    const data = { workspace_id: workspaceId, url, events: events.right, description, secret_encrypted: secretEncrypted, created_at: at };
    return right([{ type: SUBSCRIPTION_EVENTS.created, data }]);
  }
  // Decided on a stream that does not exist, so appended only while it still does not.
  if (command.kind === 'abandon') return right(state.exists || state.deleted ? [] : [{ type: SUBSCRIPTION_EVENTS.abandoned, data: {} }]);
  // Another workspace's subscription does not exist for this one.
  if (state.workspaceId !== workspaceId) return notFound();
  // A deletion whose stream removal did not complete is completed by the next DELETE.
  if (command.kind === 'delete' && state.deleted) return right([]);
  if (!state.exists) return notFound();
  switch (command.kind) {
    case 'update':
      return decideUpdate(command, state);
    case 'record_delivery_failed': {
      if (state.recentDeliveries.includes(reportKey(command.deliveryId, command.round))) return right([]);
      const failures = state.consecutiveFailures + 1;
      const decided: Decided[] = [
        { type: SUBSCRIPTION_EVENTS.failureCounted, data: { delivery_id: command.deliveryId, round: command.round, consecutive_failures: failures } },
      ];
      if (state.isActive && failures >= AUTO_DISABLE_AFTER) decided.push({ type: SUBSCRIPTION_EVENTS.deactivated, data: { reason: 'consecutive_failures' } });
      return right(decided);
    }
    // Any successful delivery resets the run, a manual retry's round of an already failed one too.
    case 'record_delivery_succeeded':
      if (state.consecutiveFailures === 0 || state.recentDeliveries.includes(reportKey(command.deliveryId, command.round))) return right([]);
      return right([{ type: SUBSCRIPTION_EVENTS.failuresReset, data: { delivery_id: command.deliveryId, round: command.round } }]);
    case 'delete':
      return right([{ type: SUBSCRIPTION_EVENTS.deleted, data: {} }]);
    case 'rotate_secret': {
      const data = { secret_encrypted: command.secretEncrypted, rotated_at: command.at, previous_expires_at: command.at + command.graceSeconds * 1_000_000 };
      return right([{ type: SUBSCRIPTION_EVENTS.secretRotated, data }]);
    }
    case 'reseal':
      return right(resealable(command, state) ? [{ type: SUBSCRIPTION_EVENTS.secretResealed, data: resealedData(command) }] : []);
  }
};

/** Both sealed values the issuer read are still the ones held. */
const resealable = ({ from, previous }: Extract<SubscriptionCommand, { kind: 'reseal' }>, state: SubscriptionState): boolean =>
  state.secretEncrypted === from && (previous === undefined || state.previousSecret?.secret === previous.from);

const resealedData = ({ to, previous }: Extract<SubscriptionCommand, { kind: 'reseal' }>) => ({
  secret_encrypted: to,
  ...(previous === undefined ? {} : { previous_secret_encrypted: previous.to }),
});

/** The replaced secret still valid at `now` (µs), if any. */
const inGrace = <S>(previous: PreviousSecret<S> | null, now: number): previous is PreviousSecret<S> => previous !== null && now < previous.expiresAt;

/** The secrets valid at `now` (µs), newest first: the current one, and the replaced one until its grace period ends. */
export const validSecrets = <S>(current: S, previous: PreviousSecret<S> | null, now: number): S[] =>
  inGrace(previous, now) ? [current, previous.secret] : [current];

/**
 * The one secret of the contract's single signature at `now`: the replaced one until its grace period
 * ends, so receivers that check only that header switch when the period ends, not at the rotation.
 */
export const contractSecret = <S>(current: S, previous: PreviousSecret<S> | null, now: number): S => (inGrace(previous, now) ? previous.secret : current);

export const evolveSubscription = evolve;
export const initialSubscription = initial;

/** The aggregate as seen by one workspace: commands on other workspaces' subscriptions find nothing. */
export const subscriptionAggregate = (workspaceId: string): Aggregate<SubscriptionState, SubscriptionCommand> => ({
  initial,
  evolve,
  decide: decideFor(workspaceId),
});
