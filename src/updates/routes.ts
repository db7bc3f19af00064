// GET /api/v1/updates: long polling (spec "Endpoints", DESIGN.md "Decisions"). The auth middleware
// has counted the request once already, however long it then waits.
import * as t from 'io-ts';
import { PublicEnvelope } from '../domain/envelope.js';
import type { RouteModule } from '../http/app.js';
import { always, answer } from '../http/operations.js';
import { setHeaders } from '../http/response-headers.js';
import type { MicrosClock } from '../log/clock.js';
import { feedItem } from './feed-item.js';
import type { LongPoll } from './long-poll.js';
import { UpdatesQuery, parseUpdatesQuery } from './query.js';

const UpdatesPage = t.type({ items: t.array(t.intersection([PublicEnvelope, t.type({ offset: t.number })])), next_offset: t.number });

export const updatesRoutes = (deps: { readonly clock: MicrosClock; readonly longPoll: LongPoll }): RouteModule => ({
  operations: [
    {
      method: 'get',
      path: '/updates',
      summary: 'Long polling: the public events from an offset (microseconds), waiting up to `timeout` seconds for one',
      query: UpdatesQuery,
      answers: [answer(200, 'The events in log order, and the offset to ask from next', UpdatesPage, always('Cache-Control'))],
    },
  ],
  api(router) {
    router.get('/updates', async (ctx) => {
      const query = parseUpdatesQuery(ctx.query, deps.clock());
      // A client that goes away frees its waiter at once.
      const gone = new AbortController();
      const abort = () => gone.abort();
      ctx.res.once('close', abort);
      const events = await deps.longPoll.poll(ctx.state.workspace.id, query, gone.signal).finally(() => ctx.res.off('close', abort));
      const last = events.at(-1);
      // A page is the caller's alone, and stale as soon as it is read.
      setHeaders(ctx, { 'Cache-Control': 'no-store' });
      // The server is closing: a keep-alive connection would hold its close until the idle timeout.
      if (deps.longPoll.draining()) ctx.set('Connection', 'close');
      const page: t.TypeOf<typeof UpdatesPage> = { items: events.map(feedItem), next_offset: last === undefined ? query.offset : (last.offset as number) + 1 };
      ctx.body = page;
    });
  },
});
