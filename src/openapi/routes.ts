// GET /api/v1/openapi.json and GET /api/v1/event-types, answered without an API key (they describe the
// API, and hold nothing of a workspace): both built once, at start, from the other route modules'
// operations and the catalogue. A codec the converter cannot read stops the start, naming it.
import * as t from 'io-ts';
import type { RouteModule } from '../http/app.js';
import { answer, type Operation } from '../http/operations.js';
import { API_PREFIX, EventTypesBody, apiDocument, eventTypes } from './document.js';

const OWN: readonly Operation[] = [
  { method: 'get', path: '/openapi.json', summary: 'This document', keyless: true, answers: [answer(200, 'The OpenAPI 3.1 document', t.UnknownRecord)] },
  {
    method: 'get',
    path: '/event-types',
    summary: 'The subscribable event names in catalogue order, each with the JSON Schema of its data',
    keyless: true,
    answers: [answer(200, 'The event types', EventTypesBody)],
  },
];

export const openApiRoutes = (modules: readonly RouteModule[]): RouteModule => {
  const document = JSON.stringify(apiDocument([...modules.flatMap((m) => m.operations ?? []), ...OWN]));
  const types = JSON.stringify(eventTypes());
  return {
    operations: OWN,
    open(router) {
      router.get(`${API_PREFIX}/openapi.json`, (ctx) => {
        ctx.type = 'application/json';
        ctx.body = document;
      });
      router.get(`${API_PREFIX}/event-types`, (ctx) => {
        ctx.type = 'application/json';
        ctx.body = types;
      });
    },
  };
};
