// Process metrics in Prometheus' text format at GET /admin/v1/metrics (admin token): resident memory,
// heap, open handles and event-loop delay, prom-client's default set, for operators and the soak
// test. The figures are the process's, so one registry serves every service the process runs. The
// default heap figures are the main thread's isolate only: a service's worker threads add theirs.
// Where the process runs a delivery engine, its backlog gauges and punctuality histograms too; where
// its log is SQLite, the commits of the main thread's connection and the writes they carried; and the
// counts the process's features keep (a dispatcher's Kafka consumer crashes, by what followed).
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { RouteModule } from '../http/app.js';
import type { HeldWrites } from '../http/middleware/write-hold.js';
import type { MicrosClock } from '../log/clock.js';
import { lateSeconds, type EngineStatusSource } from '../webhooks/dispatch/backlog.js';
import { punctualityText } from '../webhooks/dispatch/punctuality.js';

let shared: Registry | null = null;

const registry = (): Registry => {
  if (shared === null) {
    shared = new Registry();
    collectDefaultMetrics({ register: shared });
  }
  return shared;
};

/** Commits of the log's connection so far, and the writes (appends, deletes) they carried. */
export interface LogCommits {
  readonly transactions: number;
  readonly writes: number;
}

/** A worker thread of the service, by name, with its heap in use (null while it does not answer). */
export interface WorkerHeap {
  readonly thread: string;
  usedBytes(): Promise<number | null>;
}

/** A count a feature keeps since the start, by kind: a Prometheus counter with a label for the kind. */
export interface RunningCount {
  readonly name: string;
  readonly help: string;
  readonly label: string;
  /** The count of each kind so far, every kind listed (0 before its first), so that a series is there from the start. */
  counts(): Readonly<Record<string, number>>;
}

export const metricsRoutes = (
  workers: readonly WorkerHeap[] = [],
  engine?: { readonly source: EngineStatusSource; readonly clock: MicrosClock },
  heldWrites?: () => HeldWrites,
  logCommits?: () => LogCommits,
  counts: readonly RunningCount[] = [],
): RouteModule => {
  // The service's own registry: several services in one process (tests) each have their workers.
  const own = new Registry();
  new Gauge({
    name: 'nodejs_worker_heap_size_used_bytes',
    help: "Heap in use by each of the service's worker threads, in bytes (a thread that does not answer is left out).",
    labelNames: ['thread'],
    registers: [own],
    async collect() {
      this.reset();
      const used = await Promise.all(workers.map((w) => w.usedBytes()));
      workers.forEach((w, i) => {
        const bytes = used[i];
        if (bytes !== null && bytes !== undefined) this.set({ thread: w.thread }, bytes);
      });
    },
  });
  /** A counter set at each scrape from a figure kept since the start. */
  const runningTotal = <T>(name: string, help: string, figures: () => T, of: (figures: T) => number) =>
    new Counter({
      name,
      help,
      registers: [own],
      collect() {
        this.reset();
        this.inc(of(figures()));
      },
    });
  if (heldWrites !== undefined) {
    runningTotal('http_writes_held_total', 'API writes held while webhook delivery was behind and busy (backpressure), since the start.', heldWrites, (held) => held.requests);
    runningTotal('http_writes_held_seconds_total', 'Seconds API writes waited for webhook delivery (backpressure), since the start.', heldWrites, (held) => held.seconds);
  }
  if (logCommits !== undefined) {
    runningTotal('event_log_commits_total', "Transactions the main thread's connection to the SQLite event log committed, since the start.", logCommits, (c) => c.transactions);
    runningTotal(
      'event_log_commit_writes_total',
      'Writes (appends, deletions) those commits carried: over event_log_commits_total, how many writes shared a commit.',
      logCommits,
      (c) => c.writes,
    );
  }
  for (const count of counts) {
    new Counter({
      name: count.name,
      help: count.help,
      labelNames: [count.label],
      registers: [own],
      collect() {
        this.reset();
        for (const [kind, n] of Object.entries(count.counts())) this.inc({ [count.label]: kind }, n);
      },
    });
  }
  // Set from the engine's status, asked once per scrape (a thread's answer to one ping); left out
  // while the engine does not answer.
  const backlogGauges =
    engine === undefined
      ? null
      : {
          waiting: new Gauge({
            name: 'webhook_deliveries_waiting',
            help: 'Webhook attempts waiting in the retry schedule, not taken yet (left out while the delivery engine does not answer).',
            registers: [own],
          }),
          late: new Gauge({
            name: 'webhook_deliveries_late_seconds',
            help: 'How long ago the earliest waiting webhook attempt fell due, in seconds (0 when none is late).',
            registers: [own],
          }),
        };
  return {
    admin(router) {
      router.get('/metrics', async (ctx) => {
        const status = (await engine?.source()) ?? null;
        if (backlogGauges !== null && engine !== undefined) {
          backlogGauges.waiting.reset();
          backlogGauges.late.reset();
          if (status !== null) {
            backlogGauges.waiting.set(status.backlog.waiting);
            backlogGauges.late.set(lateSeconds(status.backlog, engine.clock()));
          }
        }
        const both = Registry.merge([registry(), own]);
        ctx.type = both.contentType;
        // The engine's histograms, counted where it runs (a thread hands them over as data).
        ctx.body = (await both.metrics()) + (status === null ? '' : punctualityText(status.punctuality));
      });
    },
  };
};
