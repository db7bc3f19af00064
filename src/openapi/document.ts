// The OpenAPI 3.1 document of the public API, built from the route modules' operations
// (src/http/operations.ts) and the event catalogue: every schema in it is a codec the code decodes
// with, answers in or emits events by, turned into JSON Schema (src/http/json-schema.ts). Each public
// event's envelope is written once, in components.schemas under the event's name, and referenced by
// its webhook and by /updates' tagged union of them. Every answer's headers come from the table of
// src/http/response-headers.ts.
import * as t from 'io-ts';
import { EventData } from '../domain/catalogue.js';
import { EnvelopeOf, EventEnvelope } from '../domain/envelope.js';
import { PUBLIC_EVENT_TYPES } from '../domain/event-types.js';
import { WEBHOOK_TEST_EVENT, WebhookTestData } from '../domain/subscription/subscription.js';
import { BusinessErrorBody, ShortErrorBody, ValidationErrorBody } from '../http/api-error.js';
import { closedObject, definitionOf, toJsonSchema, type JsonSchema, type SchemaRefs } from '../http/json-schema.js';
import { IDEMPOTENCY_KEY_PATTERN, NOTHING_WRITTEN } from '../http/middleware/idempotency.js';
import type { Answer, ErrorFormat, Operation } from '../http/operations.js';
import { RESPONSE_HEADERS, type ResponseHeader } from '../http/response-headers.js';

export const API_PREFIX = '/api/v1';

const ERROR_SCHEMAS: Readonly<Record<ErrorFormat, string>> = { business: 'BusinessError', short: 'ShortError', validation: 'ValidationError' };
const ref = (format: ErrorFormat): JsonSchema => ({ $ref: `#/components/schemas/${ERROR_SCHEMAS[format]}` });

/** The public events' envelopes, each a schema of its own named after its event. */
const EVENT_REFS: SchemaRefs = new Map(PUBLIC_EVENT_TYPES.map((type) => [EventEnvelope[type], `#/components/schemas/${type}`]));
const schemaOf = (codec: t.Any): JsonSchema => toJsonSchema(codec, EVENT_REFS);

/** What every keyed route may answer besides its own answers. */
const KEYED: readonly Answer[] = [
  { status: 401, error: 'short', description: 'Missing or unknown API key', headers: { 'WWW-Authenticate': 'always' } },
  { status: 429, error: 'business', description: 'RATE_LIMIT_EXCEEDED (per key and per address)', headers: { 'Retry-After': 'always' } },
  { status: 500, error: 'business', description: 'INTERNAL_ERROR' },
  { status: 503, error: 'business', description: 'MAINTENANCE_MODE or SERVICE_UNAVAILABLE', headers: { 'Retry-After': 'always' } },
];
const DECODED: Answer = { status: 422, error: 'validation', description: 'The body, query or path fails its schema' };
const WITH_BODY: Answer = { status: 413, error: 'short', description: 'Request body too large' };
/** What every POST may answer, as it takes an Idempotency-Key, body or none. */
const IDEMPOTENT: readonly Answer[] = [
  { status: 422, error: 'validation', description: 'The Idempotency-Key is not 1 to 255 visible ASCII characters' },
  { status: 422, error: 'business', description: 'IDEMPOTENCY_KEY_REUSED: the Idempotency-Key came with another request' },
  { status: 409, error: 'business', description: 'CONFLICT: a request with this Idempotency-Key is still running', headers: { 'Retry-After': 'sometimes' } },
];

/** What every answer carries besides its own headers: the request id, and for a POST the mark of a replayed answer (any answer that is recorded). */
const withCommonHeaders = (op: Operation, a: Answer): Answer => ({
  ...a,
  headers: { 'X-Request-ID': 'always', ...(op.method === 'post' && !NOTHING_WRITTEN.has(a.status) ? { 'Idempotent-Replayed': 'sometimes' } : {}), ...a.headers },
});

/** The headers of one status: each any of its answers carries, required when all of them always do. */
const headersOf = (same: readonly Answer[]): JsonSchema | undefined => {
  const names = [...new Set(same.flatMap((a) => Object.keys(a.headers ?? {}) as ResponseHeader[]))];
  if (names.length === 0) return undefined;
  return Object.fromEntries(
    names.map((name) => [name, { description: RESPONSE_HEADERS[name].description, required: same.every((a) => a.headers?.[name] === 'always'), schema: RESPONSE_HEADERS[name].schema }]),
  );
};

const IDEMPOTENCY_KEY = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description: 'Retries of a POST under the same key are answered with the first answer, and carried out at most once',
  schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN },
};

/** `/tickets/:id` → `/tickets/{id}`, and the names of its parameters. */
const openApiPath = (path: string): { path: string; names: string[] } => ({
  path: path.replace(/:(\w+)/g, '{$1}'),
  names: [...path.matchAll(/:(\w+)/g)].map((m) => m[1] as string),
});

const propertiesOf = (codec: t.Any, what: string): { properties: Record<string, JsonSchema>; required: string[] } => {
  const schema = schemaOf(codec);
  if (schema['type'] !== 'object') throw new Error(`${what}: an object codec is needed to list parameters`);
  return { properties: (schema['properties'] ?? {}) as Record<string, JsonSchema>, required: (schema['required'] ?? []) as string[] };
};

const parametersOf = (op: Operation, names: readonly string[]): JsonSchema[] => {
  const params = op.params === undefined ? { properties: {}, required: [] } : propertiesOf(op.params, `${op.method} ${op.path} params`);
  const path = names.map((name) => ({ name, in: 'path', required: true, schema: params.properties[name] ?? { type: 'string' } }));
  const query =
    op.query === undefined
      ? []
      : Object.entries(propertiesOf(op.query, `${op.method} ${op.path} query`).properties).map(([name, schema]) => ({
          name,
          in: 'query',
          required: propertiesOf(op.query as t.Any, '').required.includes(name),
          schema,
          ...(schema['type'] === 'array' ? { style: 'form', explode: true } : {}),
        }));
  return [...path, ...query, ...(op.method === 'post' ? [IDEMPOTENCY_KEY] : [])];
};

const requestBodyOf = (body: Operation['body']): JsonSchema | undefined => {
  if (body === undefined) return undefined;
  if (body === 'multipart-file') {
    const file = { type: 'object', properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } }, required: ['file'] };
    return { required: true, content: { 'multipart/form-data': { schema: file } } };
  }
  return { required: true, content: { 'application/json': { schema: closedObject(schemaOf(body)) } } };
};

const contentOf = (a: Answer): JsonSchema | undefined => {
  if ('error' in a) return { 'application/json': { schema: ref(a.error) } };
  if (a.media === 'binary') return { '*/*': { schema: {} } };
  return a.body === undefined ? undefined : { 'application/json': { schema: schemaOf(a.body) } };
};

/** One response per status: answers sharing a status (a business 422 and the schema 422) become one of several bodies. */
const responsesOf = (answers: readonly Answer[]): JsonSchema => {
  const byStatus = new Map<number, Answer[]>();
  for (const a of answers) byStatus.set(a.status, [...(byStatus.get(a.status) ?? []), a]);
  return Object.fromEntries(
    [...byStatus.entries()]
      .sort(([x], [y]) => x - y)
      .map(([status, same]) => {
        const schemas = same.map((a) => contentOf(a)?.['application/json']).filter((c): c is { schema: JsonSchema } => c !== undefined).map((c) => c.schema);
        const distinct = [...new Map(schemas.map((s) => [JSON.stringify(s), s])).values()];
        const content =
          distinct.length > 1 ? { 'application/json': { schema: { anyOf: distinct } } } : same.map(contentOf).find((c) => c !== undefined);
        const headers = headersOf(same);
        return [
          String(status),
          { description: same.map((a) => a.description).join('; '), ...(headers === undefined ? {} : { headers }), ...(content === undefined ? {} : { content }) },
        ];
      }),
  );
};

const operationOf = (op: Operation, names: readonly string[]): JsonSchema => {
  const decoded = op.body !== undefined || op.query !== undefined || op.params !== undefined || names.length > 0;
  const answers = [
    ...op.answers,
    ...(op.keyless === true ? [] : KEYED),
    ...(decoded && op.body !== 'multipart-file' ? [DECODED] : []),
    ...(op.body === undefined ? [] : [WITH_BODY]),
    ...(op.method === 'post' ? IDEMPOTENT : []),
  ].map((a) => withCommonHeaders(op, a));
  const requestBody = requestBodyOf(op.body);
  return {
    summary: op.summary,
    operationId: `${op.method}${op.path.replace(/[/:.-](\w)/g, (_, c: string) => c.toUpperCase())}`,
    ...(op.keyless === true ? { security: [] } : {}),
    parameters: parametersOf(op, names),
    ...(requestBody === undefined ? {} : { requestBody }),
    responses: responsesOf(answers),
  };
};

const pathsOf = (operations: readonly Operation[]): JsonSchema => {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const op of operations) {
    const { path, names } = openApiPath(op.path);
    const item = (paths[path] ??= {});
    if (item[op.method] !== undefined) throw new Error(`${op.method} ${op.path} is described twice`);
    item[op.method] = operationOf(op, names);
  }
  return paths;
};

/** The headers of every delivery: the contract's and the Standard Webhooks ones. */
const deliveryHeaders = (type: string): JsonSchema[] =>
  [
    [
      'X-Webhook-Signature',
      { type: 'string', pattern: '^sha256=[0-9a-f]{64}$' },
      "HMAC-SHA256 of the raw body, keyed with the secret string, lowercase hex; during a secret rotation's grace period, with the replaced secret",
    ],
    ['X-Webhook-Event', { const: type }, 'The event name'],
    ['X-Webhook-Id', { type: 'string' }, 'The delivery id: one per event and subscription, the same on every retry'],
    ['X-Webhook-Attempt', { type: 'integer', minimum: 1, maximum: 6 }, 'The attempt number'],
    ['webhook-id', { type: 'string' }, 'Standard Webhooks: the delivery id (as X-Webhook-Id)'],
    ['webhook-timestamp', { type: 'integer' }, "Standard Webhooks: this attempt's send time, Unix seconds"],
    [
      'webhook-signature',
      { type: 'string', pattern: '^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})?$' },
      'Standard Webhooks: v1, base64 HMAC-SHA256 of "id.timestamp.body" keyed with the base64 after whsec_; during a secret rotation\'s grace period one per valid secret, space separated, the new one first',
    ],
  ].map(([name, schema, description]) => ({ name, in: 'header', required: true, schema, description }));

const deliveryOf = (type: string, envelope: t.Any, summary: string): JsonSchema => ({
  post: {
    summary,
    operationId: `deliver.${type}`,
    parameters: deliveryHeaders(type),
    requestBody: { required: true, content: { 'application/json': { schema: schemaOf(envelope) } } },
    responses: { '2XX': { description: 'Delivered. Anything else (3xx included, redirects are not followed), a timeout or a network error is retried' } },
  },
});

/** `GET /event-types`: the subscribable names in catalogue order, each with the JSON Schema of its `data`. */
export const eventTypes = () => ({ items: PUBLIC_EVENT_TYPES.map((name) => ({ name, schema: toJsonSchema(EventData[name]) })) });

export const EventTypesBody = t.type({ items: t.array(t.type({ name: t.string, schema: t.UnknownRecord })) });

export const apiDocument = (operations: readonly Operation[]): JsonSchema => ({
  openapi: '3.1.0',
  info: {
    title: 'Support platform API',
    version: '1',
    description: 'Tickets, messages, contacts, long-polled updates and signed webhooks. Errors come in three body formats: BusinessError, ShortError and ValidationError.',
  },
  servers: [{ url: API_PREFIX }],
  security: [{ apiKey: [] }],
  paths: pathsOf(operations),
  webhooks: Object.fromEntries([
    ...PUBLIC_EVENT_TYPES.map((type) => [type, deliveryOf(type, EventEnvelope[type], `The ${type} event`)]),
    [WEBHOOK_TEST_EVENT, deliveryOf(WEBHOOK_TEST_EVENT, EnvelopeOf(t.literal(WEBHOOK_TEST_EVENT), WebhookTestData), 'Sent only by POST /webhooks/{webhook_id}/test')],
  ]),
  components: {
    securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: "The workspace's API key" } },
    schemas: {
      BusinessError: toJsonSchema(BusinessErrorBody),
      ShortError: toJsonSchema(ShortErrorBody),
      ValidationError: toJsonSchema(ValidationErrorBody),
      ...Object.fromEntries(PUBLIC_EVENT_TYPES.map((type) => [type, definitionOf(EventEnvelope[type], EVENT_REFS)])),
    },
  },
});
