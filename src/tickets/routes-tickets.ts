// /api/v1/tickets: open, list, read, PATCH, close, reopen, rate.
import type { ApiContext } from '../http/context.js';
import type { ApiRouter } from '../http/app.js';
import { invalid, short } from '../http/api-error.js';
import { decode } from '../http/validation.js';
import { hasIdentity } from './contacts.js';
import { CreateTicket, PatchTicket, pagingOf, RateTicket, TicketListQuery } from './codecs.js';
import { ticketOf, unwrap, type TicketRouteDeps } from './route-support.js';
import type { TicketRequest } from './ticket-commands.js';
import { pageView, ticketView } from './views.js';

export const ticketRoutes = ({ commands, readModels }: TicketRouteDeps) => {
  const answerTicket = async (ctx: ApiContext, ticketId: string) => {
    ctx.body = ticketView(await ticketOf(readModels, ctx.state.workspace.id, ticketId));
  };

  const runLifecycle = async (ctx: ApiContext, command: (ticketId: string) => TicketRequest) => {
    const ticketId = String(ctx.params['id']);
    unwrap(await commands.run(ctx.state.workspace.id, command(ticketId), ctx.state.scope));
    await answerTicket(ctx, ticketId);
  };

  return (router: ApiRouter) => {
    router.post('/tickets', async (ctx) => {
      const body = decode(CreateTicket, ctx.request.body, 'body');
      if (!hasIdentity(body.contact)) throw short(400, 'The contact needs telegram_id or email');
      const message = body.message === undefined ? null : typeof body.message === 'string' ? { content: body.message, mediaIds: [] } : { content: body.message.content ?? '', mediaIds: body.message.media_ids ?? [] };
      const ticketId = unwrap(await commands.open(ctx.state.workspace, { subject: body.subject ?? null, priority: body.priority ?? 'normal', contact: body.contact, message }, ctx.state.scope));
      ctx.status = 201;
      await answerTicket(ctx, ticketId);
    });

    router.get('/tickets', async (ctx) => {
      const query = decode(TicketListQuery, ctx.query, 'query');
      const paging = pagingOf(query);
      const where = { ...(query.status === undefined ? {} : { status: query.status }), ...(query.contact_id === undefined ? {} : { contact_id: query.contact_id }) };
      const page = await readModels.tickets.list({ partition: ctx.state.workspace.id, where, newestFirst: true, ...paging });
      ctx.body = pageView(page, paging, ticketView);
    });

    router.get('/tickets/:id', (ctx) => answerTicket(ctx, String(ctx.params['id'])));

    router.patch('/tickets/:id', async (ctx) => {
      const body = decode(PatchTicket, ctx.request.body, 'body');
      if (Object.keys(body).length === 0) throw invalid([{ type: 'missing', loc: ['body'], msg: 'Give at least one of subject, priority, status' }]);
      await runLifecycle(ctx, (ticketId) => ({ kind: 'update', ticketId, ...body }));
    });

    router.post('/tickets/:id/close', (ctx) => runLifecycle(ctx, (ticketId) => ({ kind: 'close', ticketId })));
    router.post('/tickets/:id/reopen', (ctx) => runLifecycle(ctx, (ticketId) => ({ kind: 'reopen', ticketId })));
    router.post('/tickets/:id/rate', async (ctx) => {
      const body = decode(RateTicket, ctx.request.body, 'body');
      // Spec: a rating through the API carries `comment` (null when none was given).
      await runLifecycle(ctx, (ticketId) => ({ kind: 'rate', ticketId, rating: body.rating, comment: body.comment ?? null }));
    });
  };
};
