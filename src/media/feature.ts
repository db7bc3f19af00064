// The media feature: uploads stream into the MediaStore (files under `${DATA_DIR}/media`), the log
// records their metadata. At start it removes partial files that a crash left behind.
import * as path from 'node:path';
import type { Core, Feature, FeatureFactory } from '../app/core.js';
import { createFilesystemMediaStore } from './filesystem.js';
import type { MediaStore } from './media-store.js';
import { mediaRoutes } from './routes.js';
import { mediaLinksOf } from './signed-links.js';

export const createMediaFeature = (core: Core, store: MediaStore): Feature => ({
  name: 'media',
  routes: mediaRoutes(core, store, mediaLinksOf(core.config)),
  async start() {
    const removed = await store.removeAbandoned();
    if (removed > 0) console.log(`media: removed ${removed} partial upload(s) left by an interrupted run`);
  },
});

export const mediaFeature: FeatureFactory = (core) => createMediaFeature(core, createFilesystemMediaStore(path.join(core.config.dataDir, 'media')));
