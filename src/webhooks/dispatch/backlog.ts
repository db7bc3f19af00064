// How far webhook delivery is behind: the attempts waiting in the retry schedule, and how long ago
// the earliest of them fell due (0 while every due attempt is taken at once). When receivers or the
// dispatcher are slower than writes, the backlog stays durable in the log and shows three ways: a
// log line every 10 s while the earliest due attempt is over a second late (and one when it has caught
// up), gauges at /admin/v1/metrics, and GET /admin/v1/webhooks/backlog.
import type { RouteModule } from '../../http/app.js';
import { unavailable } from '../../http/api-error.js';
import type { MicrosClock } from '../../log/clock.js';
import type { PunctualityFigures } from './punctuality.js';

export interface DeliveryBacklog {
  /** Attempts in the schedule, not taken yet (those under way are not counted). */
  readonly waiting: number;
  /** When the earliest of them falls or fell due (µs), null when none waits. */
  readonly oldestDueAt: number | null;
}

/** What the delivery engine tells of itself: its backlog and how punctual it has been. */
export interface DeliveryEngineStatus {
  readonly backlog: DeliveryBacklog;
  readonly punctuality: PunctualityFigures;
}

/** The delivery engine's status, wherever it runs; null when it does not answer (a thread restarting). */
export type EngineStatusSource = () => Promise<DeliveryEngineStatus | null>;

/** How long ago, in seconds, the earliest waiting attempt fell due; 0 when none is due. */
export const lateSeconds = (backlog: DeliveryBacklog, now: number): number =>
  backlog.oldestDueAt === null ? 0 : Math.max(0, now - backlog.oldestDueAt) / 1_000_000;

const LOG_EVERY_MS = 10_000;
/** Late by more than this, the log says so. */
const LATE_AFTER_S = 1;

/** Logs the backlog every 10 s (`everyMs`) while it is late, and once when it has caught up. */
export const watchBacklog = (read: () => Promise<DeliveryBacklog>, clock: MicrosClock, everyMs = LOG_EVERY_MS): { stop(): void } => {
  let behind = false;
  const timer = setInterval(() => {
    read().then(
      (backlog) => {
        const late = lateSeconds(backlog, clock());
        if (late > LATE_AFTER_S) {
          behind = true;
          console.warn(`webhook deliveries behind: ${backlog.waiting} attempts waiting, the earliest due ${late.toFixed(1)} s ago`);
        } else if (behind) {
          behind = false;
          console.log(`webhook deliveries caught up: ${backlog.waiting} attempts waiting, none late`);
        }
      },
      (error: unknown) => console.error('webhook delivery backlog: cannot read it:', error),
    );
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
};

/** The backlog as the admin route and /readyz answer it. */
export const backlogBody = (backlog: DeliveryBacklog, now: number) => ({
  waiting: backlog.waiting,
  oldest_due_seconds: Math.round(lateSeconds(backlog, now) * 1000) / 1000,
});

/** GET /admin/v1/webhooks/backlog: `{waiting, oldest_due_seconds}` for the whole service; 503 while its delivery engine does not answer. */
export const backlogRoutes = (source: EngineStatusSource, clock: MicrosClock): RouteModule => ({
  admin(router) {
    router.get('/webhooks/backlog', async (ctx) => {
      const backlog = (await source())?.backlog;
      if (backlog === undefined) throw unavailable('The webhook delivery engine does not answer: retry shortly');
      ctx.body = backlogBody(backlog, clock());
    });
  },
});
