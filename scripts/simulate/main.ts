// The traffic simulator (npm run simulate, scripts/simulate.ts): creates its own workspaces and drives
// realistic mixed traffic through the public API and the internal routes until the run's end. The
// first workspace also gets the tours (./traffic.ts ticketTour, ./billing.ts billingTour), unpaced and
// run to their end even past the deadline, so every catalogue type occurs there in any run. Progress
// once a second; the result counts that workspace's /api/v1/updates by type.
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { readFeed } from '../torture/feed.js';
import { send } from '../torture/http.js';
import { createPoller, runPoller } from '../torture/pollers.js';
import { createRandom } from '../torture/random.js';
import { billingLoop, billingTour, startPaidPlan, type BillingOptions, type BillingPlans } from './billing.js';
import { Abandon, attempt, createSim, tallyObject, type Sim, type SimWorkspace } from './client.js';
import { runAgent, ticketTour } from './traffic.js';

export interface SimulateOptions {
  readonly url: string;
  readonly adminToken: string;
  readonly seconds: number;
  /** Traffic requests per second, all workspaces together (the tours and billing waits come on top). */
  readonly rate: number;
  readonly workspaces: number;
  readonly seed: number;
  readonly plans?: BillingPlans;
  readonly log: (line: string) => void;
}

export interface SimulateResult {
  readonly workspace_id: string;
  readonly api_key: string;
  /** The printed workspace's /api/v1/updates, counted by type. */
  readonly events: Record<string, number>;
  /** Non-2xx answers not provoked on purpose (and failures that are not answers), by "status CODE". */
  readonly errors: Record<string, number>;
  /** Catalogue types its /updates never showed. */
  readonly missing: readonly string[];
  readonly requests: number;
  readonly refused: Record<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** How far the service's clock (its Date header) is ahead of ours, when more than its 1 s resolution explains. */
const clockSkew = async (url: string): Promise<number> => {
  const sent = await send(url, { method: 'GET', path: '/healthz', token: '' });
  if (sent.kind !== 'answer') throw new Error(`${url} does not answer: ${sent.kind === 'unknown' ? sent.error : 'connection refused'}`);
  const skew = Date.parse(sent.answer.headers.get('date') ?? '') - Date.now();
  return Number.isFinite(skew) && Math.abs(skew) > 2000 ? skew : 0;
};

const createWorkspace = async (sim: Sim, index: number): Promise<SimWorkspace> => {
  const created = await sim.request(sim.adminToken, { method: 'POST', path: '/admin/v1/workspaces', body: { name: `simulator ${index + 1}`, plan: 'business' } }, false).catch((error: unknown) => {
    throw error instanceof Abandon ? new Error(`creating a workspace: ${sim.tally.examples.get(error.message) ?? error.message}`) : error;
  });
  const id = String(created.workspace_id);
  // The widget builder's switch: visitor.reply_waiting is sent only while visitor notifications are on.
  await sim.request(sim.adminToken, { method: 'PUT', path: `/internal/v1/workspaces/${id}/widget`, body: { visitor_notifications: true } }, false);
  return { name: `simulator ${index + 1}`, id, apiKey: String(created.api_key), entryPlanRisk: false };
};

const countByType = (types: readonly string[]): Record<string, number> => {
  const counts: Record<string, number> = {};
  for (const type of types) counts[type] = (counts[type] ?? 0) + 1;
  return Object.fromEntries(Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)));
};

export const runSimulation = async (o: SimulateOptions): Promise<SimulateResult> => {
  const started = Date.now();
  const skew = await clockSkew(o.url);
  const billing: BillingOptions = { plans: o.plans ?? { paid: 'team', upgrade: 'business' }, now: () => Date.now() + skew };
  const sim = createSim(o.url, o.adminToken, o.rate, started + o.seconds * 1000, o.log);
  const random = createRandom(o.seed);
  const workspaces: SimWorkspace[] = [];
  for (let i = 0; i < o.workspaces; i++) workspaces.push(await createWorkspace(sim, i));
  const [printed, ...others] = workspaces as [SimWorkspace, ...SimWorkspace[]];
  o.log(`workspace ${printed.id}: every catalogue event; ${o.workspaces} workspace(s), ${o.rate} requests/s for ${o.seconds} s`);

  let polling = true;
  const pollers = workspaces.map((ws) => createPoller(ws.name, ws));
  const polled = pollers.map((p) => runPoller(p, () => o.url, () => !polling));
  const eventsSeen = () => pollers.reduce((sum, p) => sum + p.seen.size, 0);

  let last = { at: started, requests: 0, events: 0 };
  const progress = setInterval(() => {
    const now = { at: Date.now(), requests: sim.tally.requests, events: eventsSeen() };
    const rate = (n: number, m: number) => Math.round(((n - m) * 1000) / Math.max(1, now.at - last.at));
    o.log(
      `[${Math.round((now.at - started) / 1000)} s] ${now.requests} requests (${rate(now.requests, last.requests)}/s), ${now.events} events (${rate(now.events, last.events)}/s), ` +
        `errors ${JSON.stringify(tallyObject(sim.tally.errors))}, intended refusals ${JSON.stringify(tallyObject(sim.tally.refused))}`,
    );
    last = now;
  }, 1000);

  const agents = Math.max(2 * o.workspaces, Math.min(64, Math.ceil(o.rate / 4)));
  try {
    await Promise.all([
      ticketTour(sim, printed, random.fork()),
      attempt(async () => {
        await billingTour(sim, printed, random.fork(), billing);
        await billingLoop(sim, printed, random.fork(), billing);
      }),
      ...others.map((ws) =>
        attempt(async () => {
          await startPaidPlan(sim, ws, random.fork(), billing);
          await billingLoop(sim, ws, random.fork(), billing);
        }),
      ),
      ...Array.from({ length: agents }, (_, i) => runAgent(sim, workspaces[i % workspaces.length] as SimWorkspace, random.fork())),
    ]);
  } finally {
    clearInterval(progress);
    polling = false;
    await Promise.all(polled);
  }

  // What the printed workspace's feed shows; a last event may take a moment to be served.
  let types: string[] = [];
  for (let attempt = 0; attempt < 5; attempt++) {
    types = (await readFeed(() => o.url, printed)).map((item) => item.type);
    if (PUBLIC_EVENT_TYPES.every((type) => types.includes(type))) break;
    await sleep(500);
  }
  return {
    workspace_id: printed.id,
    api_key: printed.apiKey,
    events: countByType(types),
    errors: tallyObject(sim.tally.errors),
    missing: PUBLIC_EVENT_TYPES.filter((type) => !types.includes(type)),
    requests: sim.tally.requests,
    refused: tallyObject(sim.tally.refused),
  };
};
