// GET /api/v1/updates: long polling (spec "Endpoints", DESIGN.md "Decisions"). The auth middleware
// has counted the request once already, however long it then waits.
import type { RouteModule } from '../http/app.js';
import type { MicrosClock } from '../log/clock.js';
import { feedItem } from './feed-item.js';
import type { LongPoll } from './long-poll.js';
import { parseUpdatesQuery } from './query.js';

export const updatesRoutes = (deps: { readonly clock: MicrosClock; readonly longPoll: LongPoll }): RouteModule => ({
  api(router) {
    router.get('/updates', async (ctx) => {
      const query = parseUpdatesQuery(ctx.query, deps.clock());
      // A client that goes away frees its waiter at once.
      const gone = new AbortController();
      const abort = () => gone.abort();
      ctx.res.once('close', abort);
      const events = await deps.longPoll.poll(ctx.state.workspace.id, query, gone.signal).finally(() => ctx.res.off('close', abort));
      const last = events.at(-1);
      ctx.set('Cache-Control', 'no-store');
      // The server is closing: a keep-alive connection would hold its close until the idle timeout.
      if (deps.longPoll.draining()) ctx.set('Connection', 'close');
      ctx.body = { items: events.map(feedItem), next_offset: last === undefined ? query.offset : (last.offset as number) + 1 };
    });
  },
});
