// The articles read model: each workspace's live articles in creation order, in memory, rebuilt
// from the log at start (rows evolve with the aggregate's own evolve).
import { articleAggregate, ARTICLE_EVENT_TYPES, type Article } from '../domain/article/article.js';
import type { RecordedEvent } from '../log/event-log.js';

export interface ArticleIndex {
  readonly types: readonly string[];
  apply(event: RecordedEvent): void;
  get(workspaceId: string, articleId: string): Article | undefined;
  page(workspaceId: string, page: number, pageSize: number): { items: Article[]; total: number };
}

export const createArticleIndex = (): ArticleIndex => {
  const byWorkspace = new Map<string, Map<string, Article>>();
  return {
    types: ARTICLE_EVENT_TYPES,
    apply(event) {
      const articles = byWorkspace.get(event.workspaceId) ?? new Map<string, Article>();
      byWorkspace.set(event.workspaceId, articles);
      const id = String(event.data['article_id']);
      const next = articleAggregate.evolve(articles.get(id) ?? null, event);
      if (next === null) articles.delete(id);
      else articles.set(id, next);
    },
    get: (workspaceId, articleId) => byWorkspace.get(workspaceId)?.get(articleId),
    page(workspaceId, page, pageSize) {
      const all = [...(byWorkspace.get(workspaceId)?.values() ?? [])];
      return { items: all.slice((page - 1) * pageSize, page * pageSize), total: all.length };
    },
  };
};
