// Knowledge base: /api/v1/articles (create, list, read, update, delete). Every endpoint answers
// 403 PLAN_FEATURE_UNAVAILABLE first when the workspace's plan has no knowledge base.
import * as t from 'io-ts';
import type { Core } from '../app/core.js';
import { articleAggregate, articleStream, type Article, type ArticleCommand } from '../domain/article/article.js';
import { isoMicros } from '../domain/envelope.js';
import { domainError } from '../domain/errors.js';
import { business, invalid } from '../http/api-error.js';
import type { RouteModule } from '../http/app.js';
import type { ApiContext } from '../http/context.js';
import { answer, refusal, type Operation } from '../http/operations.js';
import { boundedInt, decode, text } from '../http/validation.js';
import { PageOf } from '../tickets/views.js';
import type { ArticleIndex } from './article-index.js';

const Title = text(300);
const Body = text(100_000);
const CreateArticle = t.type({ title: Title, body: Body });
const PatchArticle = t.partial({ title: Title, body: Body });
const ListQuery = t.partial({ page: boundedInt(1, 1_000_000), page_size: boundedInt(1, 100) });
const ArticleId = t.type({ article_id: t.string });

const ArticleView = t.type({ id: t.string, title: t.string, body: t.string, created_at: t.string, updated_at: t.string });

const view = ({ workspace_id: _, ...article }: Article): t.TypeOf<typeof ArticleView> => article;

const notIncluded = refusal(403, 'business', 'PLAN_FEATURE_UNAVAILABLE: the plan has no knowledge base');
const articleNotFound = refusal(404, 'business', 'ARTICLE_NOT_FOUND');

const operations: readonly Operation[] = [
  { method: 'post', path: '/articles', summary: 'Create a knowledge-base article', body: CreateArticle, answers: [answer(201, 'The article', ArticleView), notIncluded] },
  { method: 'get', path: '/articles', summary: 'List articles', query: ListQuery, answers: [answer(200, 'A page of articles', PageOf(ArticleView)), notIncluded] },
  { method: 'get', path: '/articles/:article_id', summary: 'Read one article', params: ArticleId, answers: [answer(200, 'The article', ArticleView), notIncluded, articleNotFound] },
  { method: 'patch', path: '/articles/:article_id', summary: 'Change title or body', params: ArticleId, body: PatchArticle, answers: [answer(200, 'The article', ArticleView), notIncluded, articleNotFound] },
  { method: 'delete', path: '/articles/:article_id', summary: 'Delete an article', params: ArticleId, answers: [answer(204, 'Deleted'), notIncluded, articleNotFound] },
];

const notFound = (articleId: string) => business(domainError('ARTICLE_NOT_FOUND', 'Article not found', { article_id: articleId }));

export const articleRoutes = (core: Core, index: ArticleIndex, settled: (position: number) => Promise<void>): RouteModule => {
  // The refusal says the way out: which plans have it, and the admin call that changes the plan.
  const plansWithIt = Object.entries(core.config.plans).flatMap(([name, limits]) => (limits.knowledgeBase ? [name] : []));
  const requireKnowledgeBase = (ctx: ApiContext) => {
    const { id, plan } = ctx.state.workspace;
    if (core.config.plans[plan]?.knowledgeBase !== true) {
      const message =
        plansWithIt.length === 0
          ? `The knowledge base is not included in the ${plan} plan, nor in any plan of this server (PLANS)`
          : `The knowledge base is not included in the ${plan} plan; it is in ${plansWithIt.join(', ')}. ` +
            `An administrator changes the plan with PATCH /admin/v1/workspaces/${id} {"plan": "${plansWithIt[0]}"}`;
      throw business(domainError('PLAN_FEATURE_UNAVAILABLE', message, { feature: 'knowledge_base', plan, plans_with_feature: plansWithIt }));
    }
  };

  /** Runs a command on the caller's article and waits until the read model has it. */
  const run = async (ctx: ApiContext, command: ArticleCommand) => {
    const result = await core.handle(articleAggregate, articleStream(command.articleId), ctx.state.workspace.id, command, ctx.state.scope);
    if (result._tag === 'Left') throw business(result.left);
    await settled(result.right.records.at(-1)?.position ?? 0);
    return result.right.state;
  };

  const target = (ctx: ApiContext) => ({ workspaceId: ctx.state.workspace.id, articleId: decode(ArticleId, ctx.params, 'path').article_id, at: isoMicros(core.clock()) });

  return {
    operations,
    api(router) {
      router.post('/articles', async (ctx: ApiContext) => {
        requireKnowledgeBase(ctx);
        const body = decode(CreateArticle, ctx.request.body, 'body');
        const article = await run(ctx, { kind: 'create', workspaceId: ctx.state.workspace.id, articleId: core.resourceId('article', ctx.state.scope), at: isoMicros(core.clock()), ...body });
        if (article === null) throw new Error('article creation recorded no event');
        ctx.status = 201;
        ctx.body = view(article);
      });

      router.get('/articles', async (ctx: ApiContext) => {
        requireKnowledgeBase(ctx);
        const query = decode(ListQuery, ctx.query, 'query');
        const page = query.page ?? 1;
        const pageSize = query.page_size ?? 20;
        const { items, total } = index.page(ctx.state.workspace.id, page, pageSize);
        ctx.body = { items: items.map(view), page, page_size: pageSize, total };
      });

      router.get('/articles/:article_id', async (ctx: ApiContext) => {
        requireKnowledgeBase(ctx);
        const { workspaceId, articleId } = target(ctx);
        const article = index.get(workspaceId, articleId);
        if (article === undefined) throw notFound(articleId);
        ctx.body = view(article);
      });

      router.patch('/articles/:article_id', async (ctx: ApiContext) => {
        requireKnowledgeBase(ctx);
        const body = decode(PatchArticle, ctx.request.body, 'body');
        if (body.title === undefined && body.body === undefined) throw invalid([{ type: 'missing', loc: ['body'], msg: 'Give at least one of title, body' }]);
        const article = await run(ctx, { kind: 'update', ...target(ctx), ...body });
        if (article === null) throw notFound(target(ctx).articleId);
        ctx.body = view(article);
      });

      router.delete('/articles/:article_id', async (ctx: ApiContext) => {
        requireKnowledgeBase(ctx);
        await run(ctx, { kind: 'delete', ...target(ctx) });
        ctx.status = 204;
      });
    },
  };
};
