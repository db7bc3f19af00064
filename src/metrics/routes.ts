// Process metrics in Prometheus' text format at GET /admin/v1/metrics (admin token): resident memory,
// heap, open handles and event-loop delay, prom-client's default set, for operators and the soak
// test. The figures are the process's, so one registry serves every service the process runs.
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { RouteModule } from '../http/app.js';

let shared: Registry | null = null;

const registry = (): Registry => {
  if (shared === null) {
    shared = new Registry();
    collectDefaultMetrics({ register: shared });
  }
  return shared;
};

export const metricsRoutes = (): RouteModule => ({
  admin(router) {
    router.get('/metrics', async (ctx) => {
      ctx.type = registry().contentType;
      ctx.body = await registry().metrics();
    });
  },
});
