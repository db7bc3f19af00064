// A workspace's webhook subscription slots (at most WEBHOOK_MAX_SUBSCRIPTIONS subscriptions at once).
// Stream `webhook-slots-<workspace>` records each slot claimed for a subscription id and each slot
// released; the count is the claims not released. A create claims before the subscription exists and
// a delete releases after its deletion marker, so the stream never counts fewer subscriptions than
// there are. All its events are internal.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import { domainError } from '../errors.js';

export const SLOT_EVENTS = {
  claimed: 'webhook.slot_claimed',
  released: 'webhook.slot_released',
} as const;

export const slotsStream = (workspaceId: string): string => `webhook-slots-${workspaceId}`;

export interface SlotsState {
  /** The stream exists: the subscriptions made before slots were counted are adopted already. */
  readonly started: boolean;
  /** Subscription id → when its slot was claimed (µs since the epoch). */
  readonly held: ReadonlyMap<string, number>;
}

export type SlotsCommand =
  | {
      readonly kind: 'claim';
      readonly subscriptionId: string;
      readonly max: number;
      /** µs since the epoch. */
      readonly at: number;
      /** The workspace's subscriptions as the read model lists them: adopted by the claim that starts the stream. */
      readonly existing: readonly string[];
    }
  | { readonly kind: 'release'; readonly subscriptionId: string };

const initial: SlotsState = { started: false, held: new Map() };

const evolve: Aggregate<SlotsState, SlotsCommand>['evolve'] = (state, { type, data }) => {
  const id = String(data['subscription_id']);
  switch (type) {
    case SLOT_EVENTS.claimed:
      return { started: true, held: new Map(state.held).set(id, Number(data['claimed_at'])) };
    case SLOT_EVENTS.released: {
      const held = new Map(state.held);
      held.delete(id);
      return { ...state, held };
    }
    default:
      return state;
  }
};

const decide: Aggregate<SlotsState, SlotsCommand>['decide'] = (command, state) => {
  const { subscriptionId } = command;
  if (command.kind === 'release') return right(state.held.has(subscriptionId) ? [{ type: SLOT_EVENTS.released, data: { subscription_id: subscriptionId } }] : []);
  if (state.held.has(subscriptionId)) return right([]);
  const adopted = state.started ? [] : command.existing;
  if (state.held.size + adopted.length >= command.max) {
    return left(
      domainError('WEBHOOK_LIMIT_REACHED', `This workspace has reached its limit of ${command.max} webhook subscriptions: delete one to add another`, {
        max_subscriptions: command.max,
      }),
    );
  }
  return right([...adopted, subscriptionId].map((id) => ({ type: SLOT_EVENTS.claimed, data: { subscription_id: id, claimed_at: command.at } })));
};

export const slotsAggregate: Aggregate<SlotsState, SlotsCommand> = { initial, evolve, decide };

/** The subscriptions whose slot was claimed before `instant` (µs). */
export const claimedBefore = (state: SlotsState, instant: number): string[] =>
  [...state.held].filter(([, claimedAt]) => claimedAt < instant).map(([id]) => id);
