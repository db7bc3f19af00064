// Knowledge-base articles: one stream per article (`article-<id>`), internal events only. The plan
// check (knowledge base in plan) is the route's, since it depends on the workspace, not the article.
import { left, right } from 'fp-ts/lib/Either.js';
import type { Aggregate } from '../aggregate.js';
import { domainError, type DomainError } from '../errors.js';

export const ARTICLE_EVENT_TYPES = ['article.created', 'article.updated', 'article.deleted'] as const;

export const articleStream = (articleId: string): string => `article-${articleId}`;

export interface Article {
  readonly id: string;
  readonly workspace_id: string;
  readonly title: string;
  readonly body: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** null: never created, or deleted. */
export type ArticleState = Article | null;

interface Target {
  readonly workspaceId: string;
  readonly articleId: string;
}

export type ArticleCommand =
  | (Target & { readonly kind: 'create'; readonly title: string; readonly body: string; readonly at: string })
  | (Target & { readonly kind: 'update'; readonly title?: string; readonly body?: string; readonly at: string })
  | (Target & { readonly kind: 'delete'; readonly at: string });

const evolve: Aggregate<ArticleState, ArticleCommand>['evolve'] = (state, { type, data }) => {
  switch (type) {
    case 'article.created':
      return {
        id: String(data['article_id']),
        workspace_id: String(data['workspace_id']),
        title: String(data['title']),
        body: String(data['body']),
        created_at: String(data['created_at']),
        updated_at: String(data['created_at']),
      };
    case 'article.updated':
      if (state === null) return state;
      return {
        ...state,
        title: typeof data['title'] === 'string' ? data['title'] : state.title,
        body: typeof data['body'] === 'string' ? data['body'] : state.body,
        updated_at: String(data['updated_at']),
      };
    case 'article.deleted':
      return null;
    default:
      return state;
  }
};

const notFound = (articleId: string): DomainError => domainError('ARTICLE_NOT_FOUND', 'Article not found', { article_id: articleId });

const blankTitle = () => left(domainError('VALIDATION_ERROR', 'The title must not be blank', { field: 'title', reason: 'blank' }));

const decide: Aggregate<ArticleState, ArticleCommand>['decide'] = (command, state) => {
  if (command.kind === 'create') {
    if (state !== null) return left(domainError('CONFLICT', 'This article id is already used', { article_id: command.articleId }));
    if (command.title.trim() === '') return blankTitle();
    const data = { article_id: command.articleId, workspace_id: command.workspaceId, title: command.title, body: command.body, created_at: command.at };
    return right([{ type: 'article.created', data }]);
  }
  // Another workspace's article is as unknown as a missing one.
  if (state === null || state.workspace_id !== command.workspaceId) return left(notFound(command.articleId));
  if (command.kind === 'delete') return right([{ type: 'article.deleted', data: { article_id: command.articleId, deleted_at: command.at } }]);
  if (command.title !== undefined && command.title.trim() === '') return blankTitle();
  const changes = {
    ...(command.title === undefined || command.title === state.title ? {} : { title: command.title }),
    ...(command.body === undefined || command.body === state.body ? {} : { body: command.body }),
  };
  if (Object.keys(changes).length === 0) return right([]);
  return right([{ type: 'article.updated', data: { article_id: command.articleId, ...changes, updated_at: command.at } }]);
};

export const articleAggregate: Aggregate<ArticleState, ArticleCommand> = { initial: null, evolve, decide };
