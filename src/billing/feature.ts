// Internal commands for what only the platform itself causes: billing and operator presence.
import type { FeatureFactory } from '../app/core.js';
import { billingRoutes } from './routes.js';
import { operatorRoutes } from './operator-routes.js';

export const billingFeature: FeatureFactory = (core) => {
  const billing = billingRoutes(core);
  const operators = operatorRoutes(core);
  return {
    name: 'billing',
    routes: {
      internal(router) {
        billing.internal?.(router);
        operators.internal?.(router);
      },
    },
  };
};
