// /api/v1 messages: a ticket's messages (posted as the workspace's bot) and the inbound text
// message of a contact (POST /messages), which lands in the contact's open ticket or opens one.
import type { ApiContext } from '../http/context.js';
import type { ApiRouter } from '../http/app.js';
import { invalid, short } from '../http/api-error.js';
import { decode } from '../http/validation.js';
import { hasIdentity } from './contacts.js';
import { InboundMessage, MessageBody, PageQuery, pagingOf } from './codecs.js';
import { messageOf, ticketOf, unwrap, type TicketRouteDeps } from './route-support.js';
import { messageView, pageView } from './views.js';

export const messageRoutes = ({ commands, readModels }: TicketRouteDeps) => {
  const answerMessage = async (ctx: ApiContext, ticketId: string, messageId: string) => {
    ctx.body = messageView(await messageOf(readModels, ticketId, messageId));
  };

  return (router: ApiRouter) => {
    router.post('/tickets/:id/messages', async (ctx) => {
      const workspaceId = ctx.state.workspace.id;
      const body = decode(MessageBody, ctx.request.body, 'body');
      const ticket = await ticketOf(readModels, workspaceId, String(ctx.params['id']));
      const input = { content: body.content ?? '', mediaIds: body.media_ids ?? [] };
      // Spec: messages of this endpoint are the bot's, with the workspace id as sender.
      const messageId = unwrap(await commands.postMessage(workspaceId, ticket.id, input, { senderType: 'bot', senderId: workspaceId, senderName: null, isInternal: false }, ctx.state.scope));
      ctx.status = 201;
      await answerMessage(ctx, ticket.id, messageId);
    });

    router.get('/tickets/:id/messages', async (ctx) => {
      const paging = pagingOf(decode(PageQuery, ctx.query, 'query'));
      const ticket = await ticketOf(readModels, ctx.state.workspace.id, String(ctx.params['id']));
      const page = await readModels.messages.list({ partition: ticket.id, newestFirst: false, ...paging });
      ctx.body = pageView(page, paging, messageView);
    });

    router.post('/messages', async (ctx) => {
      const body = decode(InboundMessage, ctx.request.body, 'body');
      if (body.ticket_id !== undefined && body.contact !== undefined) {
        throw invalid([{ type: 'value_error', loc: ['body'], msg: 'Give either ticket_id or contact, not both' }]);
      }
      if (body.ticket_id === undefined && !hasIdentity(body.contact)) throw short(400, 'Give ticket_id, or a contact with telegram_id or email');
      const input = body.ticket_id !== undefined ? { content: body.content, ticketId: body.ticket_id } : { content: body.content, contact: body.contact ?? {} };
      const messageId = unwrap(await commands.inbound(ctx.state.workspace, input, ctx.state.scope));
      const message = await readModels.messages.get(messageId);
      ctx.body = message === undefined ? { id: messageId } : messageView(message);
    });
  };
};
