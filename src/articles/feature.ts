// The knowledge-base feature: article commands and their in-memory read model.
import type { FeatureFactory } from '../app/core.js';
import { createProjectionRunner } from '../app/projection-runner.js';
import { createArticleIndex } from './article-index.js';
import { articleRoutes } from './routes.js';

export const articlesFeature: FeatureFactory = (core) => {
  const index = createArticleIndex();
  const runner = createProjectionRunner(core.log, { name: 'articles', types: index.types, checkpoint: () => 0, apply: index.apply });
  return {
    name: 'articles',
    routes: articleRoutes(core, index, runner.waitFor),
    start: () => runner.start(),
    stop: () => runner.stop(),
  };
};
