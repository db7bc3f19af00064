// /api/v1/contacts: upsert by telegram_id or email (201 whether new or not) and read one.
import type { ApiRouter } from '../http/app.js';
import { short } from '../http/api-error.js';
import { decode } from '../http/validation.js';
import { ContactInput } from './codecs.js';
import { hasIdentity } from './contacts.js';
import { contactOf, unwrap, type TicketRouteDeps } from './route-support.js';
import { contactView } from './views.js';

export const contactRoutes = ({ contacts, readModels }: TicketRouteDeps) => (router: ApiRouter) => {
  router.post('/contacts', async (ctx) => {
    const body = decode(ContactInput, ctx.request.body, 'body');
    if (!hasIdentity(body)) throw short(400, 'The contact needs telegram_id or email');
    const workspaceId = ctx.state.workspace.id;
    const saved = unwrap(await contacts.save(workspaceId, body, 'api', ctx.state.scope));
    await readModels.settledAfter(saved.records);
    ctx.status = 201;
    ctx.body = contactView(await contactOf(readModels, workspaceId, saved.contactId));
  });

  router.get('/contacts/:id', async (ctx) => {
    ctx.body = contactView(await contactOf(readModels, ctx.state.workspace.id, String(ctx.params['id'])));
  });
};
