// An operator's presence status, one stream per operator of a workspace. Setting the same status
// again changes nothing; a real change emits the public operator.status.changed.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import type { EventDataOf } from '../catalogue.js';
import { domainError } from '../errors.js';

export type OperatorStatus = EventDataOf<'operator.status.changed'>;

export const operatorStream = (workspaceId: string, userId: string): string => `operator-${workspaceId}-${userId}`;

/** Before any change an operator is offline. */
const initial = (userId: string): OperatorStatus => ({ user_id: userId, status: 'offline', status_text: null, status_emoji: null });

export type SetOperatorStatus = OperatorStatus;

const evolve: Aggregate<OperatorStatus | null, SetOperatorStatus>['evolve'] = (state, { type, data }) =>
  type === 'operator.status.changed' ? (data as unknown as OperatorStatus) : state;

const decide: Aggregate<OperatorStatus | null, SetOperatorStatus>['decide'] = (command, state) => {
  if (command.status === 'custom' && (command.status_text ?? '').trim() === '') {
    return left(domainError('VALIDATION_ERROR', 'A custom status needs a status_text', { field: 'status_text', reason: 'required_for_custom' }));
  }
  const current = state ?? initial(command.user_id);
  const same = current.status === command.status && current.status_text === command.status_text && current.status_emoji === command.status_emoji;
  return right(same ? [] : [{ type: 'operator.status.changed', data: { ...command } }]);
};

export const operatorAggregate: Aggregate<OperatorStatus | null, SetOperatorStatus> = { initial: null, evolve, decide };

export const currentStatus = (state: OperatorStatus | null, userId: string): OperatorStatus => state ?? initial(userId);
