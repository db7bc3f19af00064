// Running a billing command, for the internal routes and the billing clock alike: the billing stream
// decides, then a plan change is mirrored onto the workspace, whose plan gates the knowledge base
// and the ticket quota.
import type { Either } from 'fp-ts/lib/Either.js';
import type { Core } from '../app/core.js';
import type { CommandResult } from '../app/command-handler.js';
import type { RequestScope } from '../app/request-scope.js';
import { billingAggregate, billingStream, SUBSCRIPTION_SET, type BillingCommand, type BillingState } from '../domain/billing/billing.js';
import type { DomainError } from '../domain/errors.js';
import { workspaceStream } from '../domain/workspace/workspace.js';

/** The plan a billing event moves the workspace to, if it does. */
export const planAfter = (type: string, data: Record<string, unknown>): string | null =>
  type === 'billing.plan_changed' || type === 'billing.plan_downgraded' ? String(data['new_plan']) : type === SUBSCRIPTION_SET ? String(data['plan']) : null;

/**
 * Mirrors `plan`, which the billing event at `position` chose, onto the workspace unless the workspace
 * plan was set after that event (an admin's later choice stands). For a process that stopped between
 * the billing append and its mirror: the next start repairs it.
 */
export const repairPlanMirror = async (core: Core, workspaceId: string, plan: string, position: number, scope: RequestScope | undefined): Promise<void> => {
  const row = core.directory.workspace(workspaceId);
  if (row === undefined || row.plan === plan) return;
  const lastSet = (await core.log.readStream(workspaceStream(workspaceId))).findLast((e) => e.type === 'workspace.plan_set' || e.type === 'workspace.created');
  if (lastSet !== undefined && lastSet.position > position) return;
  const synced = await core.workspaces.run(workspaceId, { kind: 'set_plan', plan }, scope);
  if (synced._tag === 'Left') throw new Error(`${synced.left.code}: ${synced.left.message}`);
};

export const runBillingCommand = async (
  core: Core,
  workspaceId: string,
  command: BillingCommand,
  scope: RequestScope | undefined,
): Promise<Either<DomainError, CommandResult<BillingState>>> => {
  const result = await core.handle(billingAggregate, billingStream(workspaceId), workspaceId, command, scope);
  if (result._tag === 'Left') return result;
  for (const record of result.right.records) {
    const plan = planAfter(record.type, record.data);
    if (plan === null) continue;
    const synced = await core.workspaces.run(workspaceId, { kind: 'set_plan', plan }, scope);
    if (synced._tag === 'Left') return synced;
    await core.directorySettled(synced.right.records.at(-1)?.position ?? 0);
  }
  return result;
};
