// Operator presence: the dashboard's status switch (internal route), which causes
// operator.status.changed. A feature of its own: it shares nothing with billing.
import type { FeatureFactory } from '../app/core.js';
import { operatorRoutes } from './routes.js';

export const operatorsFeature: FeatureFactory = (core) => ({ name: 'operators', routes: operatorRoutes(core) });
