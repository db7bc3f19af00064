// Billing: its internal commands (payments, the plan, renewals), and the billing clock, which acts on
// paid plans at their expiry.
//
// The clock runs in every process that serves the billing routes (the embedded `all` role and each
// `api` server), over the one shared log: the renew command names the expiry it acts on and the
// append carries the stream's expected revision, so when two processes act on the same expiry one
// appends and the other decides nothing. The relay and dispatchers do not run it.
import { noRequest } from '../app/request-scope.js';
import type { Core, FeatureFactory } from '../app/core.js';
import { createProjectionRunner } from '../app/projection-runner.js';
import { billingAggregate, dueAt, EXPIRY_EVENT_TYPES, type BillingState } from '../domain/billing/billing.js';
import { createBillingClock, type BillingClock } from './clock.js';
import { planAfter, repairPlanMirror, runBillingCommand } from './commands.js';
import { billingRoutes } from './routes.js';

/** The clock and the projection that keeps its due-list: every expiry in the log, then each new one. */
const billingClockOf = (core: Core) => {
  const nowMs = () => Math.floor(core.clock() / 1000);
  const clock: BillingClock = createBillingClock({
    nowMs,
    async act(workspaceId, expiry) {
      const command = { kind: 'renew', trigger: 'auto', nowMs: nowMs(), periodMs: core.config.billing.periodMs, entryPlan: core.config.defaultPlan, expiry } as const;
      const result = await runBillingCommand(core, workspaceId, command, noRequest);
      if (result._tag === 'Left') throw new Error(`${result.left.code}: ${result.left.message}`);
    },
  });
  // Only the expiry-moving events are read, so each state here knows its plan and expiry, not its balance.
  const states = new Map<string, BillingState>();
  /** The last plan each workspace's billing chose in the log as it was at start, and where. */
  const chosen = new Map<string, { readonly plan: string; readonly position: number }>();
  let caughtUp = false;
  const runner = createProjectionRunner(core.log, {
    name: 'billing-clock',
    types: EXPIRY_EVENT_TYPES,
    checkpoint: () => 0,
    apply(event) {
      const state = billingAggregate.evolve(states.get(event.workspaceId) ?? billingAggregate.initial, event);
      states.set(event.workspaceId, state);
      clock.set(event.workspaceId, dueAt(state));
      const plan = planAfter(event.type, event.data);
      if (plan !== null && !caughtUp) chosen.set(event.workspaceId, { plan, position: event.position });
    },
  });
  return {
    async start() {
      await runner.start();
      // Expiries passed while the service was down are due at once, decided on the whole history.
      await runner.waitFor(await core.log.headPosition());
      // A process that stopped between a billing append and its mirror onto the workspace left the
      // workspace on the old plan: repaired here, at the next start of any process.
      for (const [workspaceId, { plan, position }] of chosen) {
        await repairPlanMirror(core, workspaceId, plan, position, noRequest).catch((error: unknown) => console.error(`billing: plan of workspace ${workspaceId}:`, error));
      }
      caughtUp = true;
      chosen.clear();
      clock.start();
    },
    async stop() {
      await clock.stop();
      await runner.stop();
    },
  };
};

export const billingFeature: FeatureFactory = (core) => {
  const clock = billingClockOf(core);
  return {
    name: 'billing',
    routes: billingRoutes(core),
    start: clock.start,
    stop: clock.stop,
  };
};
