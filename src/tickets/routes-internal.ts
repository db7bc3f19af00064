// /internal/v1 (admin token): real domain commands for the catalogue events the public API cannot
// cause — assignment, transfer, force take, operator messages and notes, edits, reactions, widget
// identify and rating, visitor.reply_waiting — the widget's settings, and blocking contacts.
// Workspace-scoped by path.
import { loadState } from '../app/command-handler.js';
import { replyWaitingHeld } from '../domain/contact/contact.js';
import { widgetAggregate, widgetStream } from '../domain/widget/widget.js';
import type { ApiRouter } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { business, invalid, notFound, short } from '../http/api-error.js';
import { decode } from '../http/validation.js';
import { previewOf } from '../../projections/tickets.js';
import { AssignBody, ContactInput, EditMessageBody, ForceTakeBody, OperatorMessageBody, ReactionBody, ReplyWaitingBody, TransferBody, WidgetRatingBody, WidgetSettingsBody } from './codecs.js';
import { hasIdentity } from './contacts.js';
import { contactOf, messageOf, ticketOf, unwrap, type TicketRouteDeps } from './route-support.js';
import type { Sender, TicketRequest } from './ticket-commands.js';
import { contactView, messageView, ticketView } from './views.js';

const TICKET = '/workspaces/:workspace_id/tickets/:id';
const MESSAGE = `${TICKET}/messages/:message_id`;
const CONTACT = '/workspaces/:workspace_id/contacts/:contact_id';

export const internalRoutes = ({ core, commands, contacts, readModels }: TicketRouteDeps) => (router: ApiRouter) => {
  const workspaceOf = (ctx: ApiContext): string => {
    const id = String(ctx.params['workspace_id']);
    if (core.directory.workspace(id) === undefined) throw notFound('Workspace');
    return id;
  };
  const param = (ctx: ApiContext, name: string) => String(ctx.params[name]);

  const onTicket = async (ctx: ApiContext, command: (ticketId: string) => TicketRequest) => {
    const workspaceId = workspaceOf(ctx);
    const ticketId = param(ctx, 'id');
    unwrap(await commands.run(workspaceId, command(ticketId), ctx.state.scope));
    ctx.body = ticketView(await ticketOf(readModels, workspaceId, ticketId));
  };

  const onMessage = async (ctx: ApiContext, command: (ticketId: string, messageId: string) => TicketRequest) => {
    const workspaceId = workspaceOf(ctx);
    const [ticketId, messageId] = [param(ctx, 'id'), param(ctx, 'message_id')];
    unwrap(await commands.run(workspaceId, command(ticketId, messageId), ctx.state.scope));
    ctx.body = messageView(await messageOf(readModels, ticketId, messageId));
  };

  const onContact = async (ctx: ApiContext, blocked: boolean) => {
    const workspaceId = workspaceOf(ctx);
    const saved = unwrap(await contacts.run(workspaceId, param(ctx, 'contact_id'), { kind: 'set_blocked', blocked }, ctx.state.scope));
    await readModels.settledAfter(saved.records);
    ctx.body = contactView(await contactOf(readModels, workspaceId, saved.contactId));
  };

  router.post(`${TICKET}/assign`, async (ctx) => {
    const b = decode(AssignBody, ctx.request.body, 'body');
    await onTicket(ctx, (ticketId) => ({ kind: 'assign', ticketId, operatorId: b.operator_id, operatorName: b.operator_name, operatorAvatarUrl: b.operator_avatar_url ?? null }));
  });
  router.post(`${TICKET}/transfer`, async (ctx) => {
    const b = decode(TransferBody, ctx.request.body, 'body');
    await onTicket(ctx, (ticketId) => ({
      kind: 'transfer',
      ticketId,
      departmentId: b.department_id,
      departmentName: b.department_name,
      operatorId: b.operator_id ?? null,
      operatorName: b.operator_name ?? null,
    }));
  });
  router.post(`${TICKET}/force-take`, async (ctx) => {
    const b = decode(ForceTakeBody, ctx.request.body, 'body');
    await onTicket(ctx, (ticketId) => ({ kind: 'force_take', ticketId, operatorId: b.operator_id }));
  });

  // A visitor rates the ticket in the widget: ticket.rated without `comment`.
  router.post(`${TICKET}/rate`, async (ctx) => {
    const b = decode(WidgetRatingBody, ctx.request.body, 'body');
    await onTicket(ctx, (ticketId) => ({ kind: 'rate', ticketId, rating: b.rating }));
  });

  router.post(`${TICKET}/messages`, async (ctx) => {
    const b = decode(OperatorMessageBody, ctx.request.body, 'body');
    const workspaceId = workspaceOf(ctx);
    if (b.sender === 'operator' && b.operator_id === undefined) throw invalid([{ type: 'missing', loc: ['body', 'operator_id'], msg: 'Field required for an operator message' }]);
    const isInternal = b.is_internal ?? false;
    // A system message is a bot message without a sender (it cannot be edited).
    const sender: Sender =
      b.sender === 'operator'
        ? { senderType: 'operator', senderId: b.operator_id ?? null, senderName: b.operator_name ?? null, isInternal }
        : { senderType: 'bot', senderId: null, senderName: null, isInternal };
    const ticketId = param(ctx, 'id');
    const messageId = unwrap(await commands.postMessage(workspaceId, ticketId, { content: b.content ?? '', mediaIds: b.media_ids ?? [] }, sender, ctx.state.scope));
    ctx.status = 201;
    ctx.body = messageView(await messageOf(readModels, ticketId, messageId));
  });
  router.patch(MESSAGE, async (ctx) => {
    const b = decode(EditMessageBody, ctx.request.body, 'body');
    await onMessage(ctx, (ticketId, messageId) => ({ kind: 'edit_message', ticketId, messageId, content: b.content }));
  });
  router.post(`${MESSAGE}/reactions`, async (ctx) => {
    const b = decode(ReactionBody, ctx.request.body, 'body');
    await onMessage(ctx, (ticketId, messageId) => ({ kind: 'add_reaction', ticketId, messageId, reactorKind: b.reactor_kind, reactorId: b.reactor_id, emoji: b.emoji }));
  });
  router.delete(`${MESSAGE}/reactions/:reactor_id`, (ctx) =>
    onMessage(ctx, (ticketId, messageId) => ({ kind: 'remove_reaction', ticketId, messageId, reactorId: param(ctx, 'reactor_id') })),
  );

  const widgetOf = async (workspaceId: string) => (await loadState(core.log, widgetStream(workspaceId), widgetAggregate.evolve, widgetAggregate.initial)).state;
  const widgetView = (workspaceId: string, settings: { visitorNotifications: boolean }) => ({ workspace_id: workspaceId, visitor_notifications: settings.visitorNotifications });

  // The widget builder's settings: visitor notifications (visitor.reply_waiting) are off until turned on.
  router.get('/workspaces/:workspace_id/widget', async (ctx) => {
    const workspaceId = workspaceOf(ctx);
    ctx.body = widgetView(workspaceId, await widgetOf(workspaceId));
  });
  router.put('/workspaces/:workspace_id/widget', async (ctx) => {
    const b = decode(WidgetSettingsBody, ctx.request.body, 'body');
    const workspaceId = workspaceOf(ctx);
    const result = await core.handle(widgetAggregate, widgetStream(workspaceId), workspaceId, { visitorNotifications: b.visitor_notifications }, ctx.state.scope);
    if (result._tag === 'Left') throw business(result.left);
    ctx.body = widgetView(workspaceId, result.right.state);
  });

  // The widget saw an operator's reply while the visitor was away. The contact decides whether it
  // is told (domain/contact): with visitor notifications on, to a widget visitor, once per 5 minutes.
  router.post(`${TICKET}/reply-waiting`, async (ctx) => {
    const b = decode(ReplyWaitingBody, ctx.request.body, 'body');
    const workspaceId = workspaceOf(ctx);
    const ticket = await ticketOf(readModels, workspaceId, param(ctx, 'id'));
    const message = await messageOf(readModels, ticket.id, b.message_id);
    const command = {
      kind: 'reply_waiting',
      ticketId: ticket.id,
      messageId: message.id,
      operatorName: b.operator_name,
      preview: previewOf(message.content),
      locale: b.locale ?? 'en',
      surface: b.surface ?? 'widget',
      openUrl: b.open_url ?? `/api/v1/tickets/${ticket.id}`,
      visitorNotifications: (await widgetOf(workspaceId)).visitorNotifications,
    } as const;
    const result = unwrap(await contacts.run(workspaceId, ticket.contact_id, command, ctx.state.scope));
    await readModels.settledAfter(result.records);
    if (result.records.length > 0) {
      ctx.body = { emitted: true };
      return;
    }
    // Nothing was appended: the state answered is the one the command was decided on.
    ctx.body = { emitted: false, reason: replyWaitingHeld({ ...command, now: core.clock() }, result.state) ?? 'sent_within_5_minutes' };
  });

  router.post('/workspaces/:workspace_id/contacts/identify', async (ctx) => {
    const b = decode(ContactInput, ctx.request.body, 'body');
    const workspaceId = workspaceOf(ctx);
    if (!hasIdentity(b)) throw short(400, 'The contact needs telegram_id or email');
    const saved = unwrap(await contacts.save(workspaceId, b, 'widget', ctx.state.scope));
    await readModels.settledAfter(saved.records);
    ctx.body = contactView(await contactOf(readModels, workspaceId, saved.contactId));
  });
  router.post(`${CONTACT}/block`, (ctx) => onContact(ctx, true));
  router.post(`${CONTACT}/unblock`, (ctx) => onContact(ctx, false));
};
