// The crash torture of the embedded service: clients write, long-poll and churn webhook
// subscriptions while the service is killed with SIGKILL at a random moment of each cycle and started
// again on the same data folder. After each restart the feeds and the writes acknowledged so far are
// checked; at the end, after the retries have settled, everything is, deliveries included. With
// `distributed` the same run goes against a cluster (scripts/torture/cluster.ts): each cycle kills one
// of its API servers, relay, dispatchers, Kafka or Redis.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { uniqueEmail } from '../../test/support/tickets-fixtures.js';
import { checkDeliveries, missingDeliveries } from './checks-deliveries.js';
import { checkOrder, checkPoller, checkStable } from './checks-feed.js';
import { checkWrites } from './checks-writes.js';
import { readFeed, type FeedItem } from './feed.js';
import { createFindings, LOSSES, note, VIOLATIONS, violationCount, type Findings } from './findings.js';
import { send } from './http.js';
import { createLedger, record, type Ledger, type Workspace } from './ledger.js';
import { createPoller, runPoller } from './pollers.js';
import { createRandom } from './random.js';
import { createClusterUnderTest, type Target } from './cluster.js';
import { ADMIN_TOKEN, createServiceUnderTest, type ServiceUnderTest } from './service.js';
import { runClient } from './traffic.js';
import { startHooks, type Hooks } from './webhooks.js';
import { createWriter } from './writer.js';

export interface TortureOptions {
  readonly cycles: number;
  readonly secondsPerCycle: number;
  readonly seed: number;
  /** The longest the end waits for keyed retries, then for deliveries, to settle. */
  readonly settleSeconds: number;
  readonly clientsPerWorkspace: number;
  readonly log: (line: string) => void;
  /**
   * Kill -9 and restart at the end of each cycle (the torture), or not: then every cycle lasts
   * exactly `secondsPerCycle` and ends with `onCycle` (the soak samples the service there).
   */
  readonly crash?: boolean;
  readonly onCycle?: (service: ServiceUnderTest, cycle: number) => Promise<void>;
  /** The distributed mode instead of the embedded service (it starts its own Kafka and Redis). */
  readonly distributed?: boolean;
  /** The distributed mode's crash targets, in rotation (default all). */
  readonly targets?: readonly Target[];
}

export interface Summary {
  readonly cycles: number;
  readonly acknowledged: number;
  readonly lost: number;
  readonly duplicate_deliveries: number;
  readonly max_recovery_ms: number;
  readonly [figure: string]: number;
}

export interface TortureResult {
  readonly summary: Summary;
  readonly findings: Findings;
  /** The service's last output lines, for a failing run's report. */
  readonly outputs: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const createWorkspace = async (service: ServiceUnderTest, name: string): Promise<Workspace> => {
  const sent = await send(service.url, { method: 'POST', path: '/admin/v1/workspaces', token: ADMIN_TOKEN, body: { name, plan: 'business' } });
  if (sent.kind !== 'answer' || sent.answer.status !== 201) throw new Error(`creating workspace ${name}: ${JSON.stringify(sent)}`);
  return { name, id: String(sent.answer.body.workspace_id), apiKey: String(sent.answer.body.api_key) };
};

/** Waits until every API server takes the workspace's new key (each learns of it from the shared log). */
const keyKnownEverywhere = async (service: ServiceUnderTest, ws: Workspace): Promise<void> => {
  const deadline = Date.now() + 60_000;
  for (const url of service.urls) {
    for (;;) {
      const sent = await send(url, { method: 'GET', path: '/api/v1/tickets', token: ws.apiKey });
      if (sent.kind === 'answer' && sent.answer.status === 200) break;
      if (Date.now() > deadline) throw new Error(`the key of ${ws.name} on ${url}: ${JSON.stringify(sent)}`);
      await sleep(100);
    }
  }
};

const readFeeds = async (service: ServiceUnderTest, workspaces: readonly Workspace[]) =>
  new Map(await Promise.all(workspaces.map(async (ws) => [ws, await readFeed(() => service.url, ws)] as const)));

/** Waits while `pending()` is above zero, at most `seconds`. */
const settle = async (seconds: number, pending: () => number): Promise<void> => {
  const deadline = Date.now() + seconds * 1000;
  while (pending() > 0 && Date.now() < deadline) await sleep(250);
};

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

/** A probe's event not delivered by then counts as recovered late (the end's checks judge the delivery itself). */
const PROBE_DELIVERY_TIMEOUT_MS = 120_000;

/** With several kinds of target (a cluster): the longest recovery of each, to its write and to its probe's delivery. */
const recoveryByTarget = (recoveries: readonly { readonly target: string; readonly ms: number; readonly deliveredMs: number }[]): Record<string, number> => {
  const targets = [...new Set(recoveries.map((r) => r.target))];
  if (targets.length < 2) return {};
  return Object.fromEntries(
    targets.flatMap((t) => {
      const mine = recoveries.filter((r) => r.target === t);
      return [[`max_recovery_ms_${t}`, Math.max(...mine.map((r) => r.ms))], [`max_delivery_recovery_ms_${t}`, Math.max(...mine.map((r) => r.deliveredMs))]];
    }),
  );
};

export const runTorture = async (o: TortureOptions): Promise<TortureResult> => {
  const started = Date.now();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-torture-'));
  const random = createRandom(o.seed);
  const service = o.distributed === true ? createClusterUnderTest(dataDir, { random: random.fork(), log: o.log, ...(o.targets === undefined ? {} : { targets: o.targets }) }) : createServiceUnderTest(dataDir);
  const ledger: Ledger = createLedger();
  const findings = createFindings();
  const baseUrl = () => service.url;
  const writer = createWriter(ledger, baseUrl);
  let retrying = true;
  let stopped = false;
  let hooks: Hooks | undefined;
  try {
    await service.start();
    hooks = await startHooks(baseUrl, () => retrying);
    const workspaces = [await createWorkspace(service, 'alpha'), await createWorkspace(service, 'beta')];
    for (const ws of workspaces) await keyKnownEverywhere(service, ws);
    const [alpha, beta] = workspaces as [Workspace, Workspace];
    // Before any traffic: every event of their workspace is theirs to receive.
    await hooks.create(alpha, 'alpha-all', [], 0);
    await hooks.create(alpha, 'alpha-tickets', ['ticket.created', 'ticket.closed', 'message.created'], 0);
    await hooks.create(beta, 'beta-all', [], 0);
    const pollers = [createPoller('alpha-poll', alpha), createPoller('alpha-poll-closed', alpha, ['ticket.closed', 'ticket.reopened']), createPoller('beta-poll', beta)];

    const isStopped = () => stopped;
    // A task that fails stops the run; its error is thrown at the run's next step.
    let failure: { error: unknown } | undefined;
    const guard = (task: Promise<void>) =>
      task.catch((error: unknown) => {
        failure ??= { error };
        stopped = true;
      });
    const healthy = () => {
      if (failure !== undefined) throw failure.error;
    };
    const traffic = [
      ...workspaces.flatMap((workspace) =>
        Array.from({ length: o.clientsPerWorkspace }, (_, i) =>
          runClient({ name: `${workspace.name}${i}`, workspace, ledger, writer, random: random.fork(), baseUrl, stopped: isStopped }),
        ),
      ),
      ...pollers.map((p) => runPoller(p, baseUrl, isStopped)),
    ].map(guard);
    // A churn may be waiting for its own keyed create to be decided, like the clients' retries.
    let churning = workspaces.length;
    const churns = workspaces.map((ws) => guard(hooks!.churn(ws, random.fork(), isStopped)).finally(() => (churning -= 1)));

    const recoveries: { readonly target: string; readonly ms: number; readonly deliveredMs: number }[] = [];
    let feeds = new Map<Workspace, readonly FeedItem[]>();
    /** The last probe acknowledged: a public contact.created, which alpha-all must receive. */
    let probed = '';
    const probe = async (through?: string) => {
      const entry = record(ledger, { kind: 'identify', workspace: alpha, marker: `probe-${recoveries.length}-${Date.now()}`, ticketId: null, keyed: false });
      const path = `/internal/v1/workspaces/${alpha.id}/contacts/identify`;
      const spec = { method: 'POST', path, token: ADMIN_TOKEN, body: { email: uniqueEmail(), full_name: entry.marker } };
      const acked = (await (through === undefined ? writer : createWriter(ledger, () => through)).write(entry, spec)) !== null;
      if (acked) probed = entry.marker;
      return acked;
    };
    /** Resolves once the last probe's event reached alpha-all (the whole path works again), at most RECOVERY_TIMEOUT_MS. */
    const probeDelivered = async () => {
      const deadline = Date.now() + PROBE_DELIVERY_TIMEOUT_MS;
      const marker = Buffer.from(probed);
      for (let from = 0; Date.now() < deadline; await sleep(10)) {
        const arrived = hooks!.deliveries.slice(from);
        from += arrived.length;
        if (arrived.some((d) => d.label === 'alpha-all' && d.status < 300 && d.request.body.includes(marker))) return true;
      }
      return false;
    };
    const checkNow = async (label: string, incremental: boolean) => {
      const from = Date.now();
      const next = await readFeeds(service, workspaces);
      for (const [ws, feed] of next) {
        checkOrder(`${label} ${ws.name}`, feed, findings);
        checkStable(`${label} ${ws.name}`, feeds.get(ws) ?? [], feed, findings);
      }
      feeds = next;
      await checkWrites(ledger.writes, feeds, baseUrl, { decidedBefore: from, incremental }, findings);
    };

    /** New findings as they come, so a long run shows them before its end. */
    const reported = new Set<string>();
    const reportNew = () => {
      for (const [kind, found] of Object.entries(findings)) {
        for (const [subject, detail] of found) {
          if (reported.has(`${kind}/${subject}`)) continue;
          reported.add(`${kind}/${subject}`);
          o.log(`  ${kind}: ${detail}`);
        }
      }
    };

    for (let cycle = 1; cycle <= o.cycles; cycle++) {
      if (o.crash === false) {
        await sleep(o.secondsPerCycle * 1000);
        healthy();
        await o.onCycle?.(service, cycle);
        continue;
      }
      const runFor = Math.round(o.secondsPerCycle * 1000 * (0.2 + 0.8 * random.next()));
      await sleep(runFor);
      healthy();
      const target = await service.crash();
      const from = Date.now();
      const recovery = await service.restart(probe);
      const delivered = await probeDelivered();
      const deliveredMs = Date.now() - from;
      recoveries.push({ target: target.split(' ')[0] ?? target, ms: recovery, deliveredMs });
      await checkNow(`after restart ${cycle}`, true);
      const acked = ledger.writes.filter((w) => w.outcome === 'acked').length;
      // The checks' own time apart: on a machine short of cores they take longer than the recovery.
      const delivery = delivered ? `its probe delivered after ${deliveredMs} ms` : `its probe not delivered within ${PROBE_DELIVERY_TIMEOUT_MS} ms`;
      o.log(`cycle ${cycle}/${o.cycles}: killed ${target} after ${runFor} ms, recovered in ${recovery} ms, ${delivery}, checked in ${Date.now() - from - deliveredMs} ms; ${acked} writes acknowledged, ${ledger.retrying.size} keyed retries running, ${hooks.deliveries.length} deliveries, ${violationCount(findings)} violations`);
      reportNew();
    }

    await sleep(1000);
    stopped = true;
    await Promise.all(traffic);
    o.log(`traffic stopped; waiting up to ${o.settleSeconds} s for ${ledger.retrying.size} keyed retries`);
    await settle(o.settleSeconds, () => ledger.retrying.size + churning);
    retrying = false;
    writer.stopRetrying();
    await Promise.all([...ledger.retrying, ...churns]);
    healthy();
    await checkNow('at the end', false);
    for (const p of pollers) checkPoller(p, feeds.get(p.workspace) ?? [], findings);
    const h = hooks;
    o.log(`waiting up to ${o.settleSeconds} s for ${missingDeliveries(h.subscriptions, h.deliveries, feeds).length} deliveries`);
    await settle(o.settleSeconds, () => missingDeliveries(h.subscriptions, h.deliveries, feeds).length);
    const figures = checkDeliveries(h.subscriptions, h.deliveries, feeds, findings);
    for (const lostCreate of h.lostCreates) note(findings, 'lost_writes', lostCreate, lostCreate);
    for (const anomaly of ledger.anomalies) note(findings, 'idempotency_anomalies', anomaly, anomaly);

    const count = (outcome: string) => ledger.writes.filter((w) => w.outcome === outcome).length;
    const webhookWrites = h.subscriptions.filter((s) => s.createOutcome === 'acked').length + h.subscriptions.filter((s) => s.deletedAt !== null).length;
    const summary: Summary = {
      cycles: o.cycles,
      acknowledged: count('acked') + webhookWrites,
      lost: LOSSES.reduce((n, kind) => n + findings[kind].size, 0),
      duplicate_deliveries: figures.duplicates,
      max_recovery_ms: Math.max(0, ...recoveries.map((r) => r.ms)),
      ...Object.fromEntries(Object.keys(VIOLATIONS).map((kind) => [kind, findings[kind as keyof Findings].size])),
      median_recovery_ms: median(recoveries.map((r) => r.ms)),
      max_delivery_recovery_ms: Math.max(0, ...recoveries.map((r) => r.deliveredMs)),
      median_delivery_recovery_ms: median(recoveries.map((r) => r.deliveredMs)),
      ...recoveryByTarget(recoveries),
      answers_lost: count('answer_lost'),
      unknown_outcomes: count('unknown'),
      events_checked: [...feeds.values()].reduce((n, feed) => n + feed.length, 0),
      long_poll_items: pollers.reduce((n, p) => n + p.seen.size, 0),
      deliveries_received: h.deliveries.length,
      deliveries_unchecked: figures.unchecked,
      latest_delivery_after_delete_ms: Number.isFinite(figures.latestAfterDelete) ? figures.latestAfterDelete : 0,
      max_receiver_lag_ms: h.deliveries.reduce((max, d) => Math.max(max, d.lagMs), 0),
      subscriptions: h.subscriptions.length,
      seed: o.seed,
      seconds: Math.round((Date.now() - started) / 1000),
    };
    return { summary, findings, outputs: service.outputs(80) };
  } finally {
    stopped = true;
    retrying = false;
    writer.stopRetrying();
    await service.stop();
    await hooks?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
};
