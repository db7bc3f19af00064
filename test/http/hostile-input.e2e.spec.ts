// Hostile input against a real listening server, over every registered route: /api/v1 with a
// working API key, /admin/v1 and /internal/v1 with the admin token, and the open health routes.
// Bodies of any shape, size, depth and encoding; odd query strings; odd Authorization and
// X-Request-ID headers; other spellings of each path; requests Node's own parser refuses. Every
// answer comes within a deadline, is never a 5xx (a 503 only in the business envelope), carries
// X-Request-ID, and is JSON: one of the contract's three error formats for an error (spec
// "Errors"), any JSON on success (204, a media download and the metrics text aside). Path parameters are ids of the
// caller's workspace, ids of another workspace, and hostile strings; no request may write to that
// other workspace (checked in the log after every request, and through its own API at the end).
import { createHash } from 'node:crypto';
import { Agent } from 'node:http';
import { expect } from 'chai';
import fc from 'fast-check';
import { isPublicEventType } from '../../src/domain/event-types.js';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { sendRaw, type RawReply } from '../support/hostile-http.js';
import { errorFormatOf } from '../support/http-formats.js';
import { rawRequest } from '../support/raw-http.js';
import { ADMIN_TOKEN, startTestService, type TestService, type TestWorkspace } from '../support/server.js';
import { surfaceOf, type Surface } from '../support/surfaces.js';

/** Runs of each property; a run is one request, to a route the run picks. */
const RUNS = 400;
/** node:http's default limit on a request's line and headers, which the server keeps. */
const HEAD_LIMIT = 16 * 1024;
/** Every request must be answered completely within this time: a hang fails the property, not mocha. */
const ANSWER_WITHIN_MS = 10_000;
/** The server's default BODY_LIMIT_BYTES. */
const BODY_LIMIT = 1_048_576;
/** …and the next request on the same connection (GET /healthz) within this. */
const NEXT_ANSWER_WITHIN_MS = 2_000;
const VALID_REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

// ---------------------------------------------------------------------------------------------
// Routes, their parameters and their bodies


interface Route {
  readonly method: string;
  readonly path: string;
  readonly surface: Surface;
  /** `METHOD /pattern`, as in SCHEMAS. */
  readonly key: string;
}


/** Every route the service registered, on every surface, as the service lists them (HEAD included). */
const routesOf = (ts: TestService): Route[] =>
  ts.service.routes.flatMap((r) => r.methods.map((method) => ({ method, path: r.path, surface: surfaceOf(r.path), key: `${method} ${r.path}` })));

/** Ids of one workspace's records by kind; the literal segment before a path parameter names its kind. */
type Ids = Record<string, string[]>;
const KIND_OF_SEGMENT: Readonly<Record<string, string>> = {
  media: 'media',
  articles: 'article',
  webhooks: 'webhook',
  deliveries: 'delivery',
  tickets: 'ticket',
  contacts: 'contact',
  workspaces: 'workspace',
  keys: 'key',
  operators: 'user',
  messages: 'message',
  reactions: 'reactor',
};

const paramKinds = (path: string): string[] => {
  const segments = path.split('/');
  return segments.flatMap((s, i) => (s.startsWith(':') ? [KIND_OF_SEGMENT[segments[i - 1] ?? ''] ?? 'other'] : []));
};

/** The path with its parameters replaced, in order, by already encoded segments. */
const fill = (path: string, segments: readonly string[]): string => {
  let i = 0;
  return path.replace(/:[A-Za-z_]+/g, () => segments[i++] ?? 'x');
};

const first = (ids: Ids, kind: string): string => ids[kind]?.[0] ?? 'x';

/** Percent-encodes the UTF-8 bytes of `s` (all of them, or all but the unreserved ones). */
const pct = (s: string, all = false): string =>
  [...Buffer.from(s, 'utf8')].map((b) => (!all && /[A-Za-z0-9\-._~]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');

type JsonType = 'string' | 'number' | 'boolean' | 'null' | 'array' | 'object';
const jsonTypeOf = (v: unknown): JsonType => (v === null ? 'null' : Array.isArray(v) ? 'array' : (typeof v as JsonType));

/** A route that reads a JSON object body: the JSON types each field takes, and a valid body. */
interface BodySchema {
  readonly fields: Readonly<Record<string, readonly JsonType[]>>;
  readonly sample: (ids: Ids) => Record<string, unknown>;
  /** Path parameter values under which the sample is accepted, when the first id of each kind is not one. */
  readonly params?: (ids: Ids) => readonly string[];
}

const S: readonly JsonType[] = ['string'];
const SN: readonly JsonType[] = ['string', 'null'];
const N: readonly JsonType[] = ['number'];
const B: readonly JsonType[] = ['boolean'];
const A: readonly JsonType[] = ['array'];
const CONTACT = { telegram_id: ['string', 'number', 'null'], email: SN, full_name: SN, phone: SN, internal_id: SN } as const;
const I = '/internal/v1/workspaces/:workspace_id';

/** The body of every route that reads one (from the routes' io-ts codecs); the multipart upload is left out. */
const SCHEMAS: Readonly<Record<string, BodySchema>> = {
  'POST /api/v1/articles': { fields: { title: S, body: S }, sample: () => ({ title: 'T', body: 'B' }) },
  'PATCH /api/v1/articles/:article_id': { fields: { title: S, body: S }, sample: () => ({ title: 'T2' }) },
  'POST /api/v1/webhooks': { fields: { url: S, events: A, description: S }, sample: () => ({ url: 'http://127.0.0.1:9/hook', events: ['ticket.created'], description: 'd' }) },
  'PATCH /api/v1/webhooks/:webhook_id': { fields: { url: S, events: A, description: S, is_active: B }, sample: () => ({ description: 'd2', is_active: true }) },
  'POST /api/v1/tickets': {
    fields: { contact: ['object'], subject: SN, priority: S, message: ['string', 'object'] },
    sample: () => ({ contact: { email: 'h@example.com' }, subject: 's', priority: 'high', message: 'hi' }),
  },
  'PATCH /api/v1/tickets/:id': { fields: { subject: SN, priority: S, status: S }, sample: () => ({ subject: 's2', priority: 'normal' }) },
  'POST /api/v1/tickets/:id/rate': { fields: { rating: N, comment: SN }, sample: () => ({ rating: 5, comment: 'ok' }), params: (ids) => [ids['ticket']?.[1] ?? 'x'] },
  'POST /api/v1/tickets/:id/messages': { fields: { content: S, media_ids: A }, sample: () => ({ content: 'hello', media_ids: [] }) },
  'POST /api/v1/messages': { fields: { content: S, ticket_id: S, contact: ['object'] }, sample: (ids) => ({ content: 'in', ticket_id: first(ids, 'ticket') }) },
  'POST /api/v1/contacts': { fields: CONTACT, sample: () => ({ email: 'c@example.com', full_name: 'C' }) },
  'POST /admin/v1/workspaces': { fields: { name: S, plan: S }, sample: () => ({ name: 'w', plan: 'team' }) },
  'PATCH /admin/v1/workspaces/:workspace_id': { fields: { blocked: B, plan: S }, sample: () => ({ plan: 'business' }) },
  'PATCH /admin/v1/workspaces/:workspace_id/keys/:key_id': { fields: { status: S }, sample: () => ({ status: 'active' }) },
  [`PUT ${I}/media-bucket`]: { fields: { base_url: SN }, sample: () => ({ base_url: null }) },
  [`PUT ${I}/billing/subscription`]: {
    fields: { plan: S, price: N, expires_at: S, auto_renew: B, next_plan: ['object', 'null'], trial: B },
    sample: () => ({ plan: 'business', price: 10, expires_at: '2030-01-01T00:00:00Z' }),
  },
  [`POST ${I}/billing/payments`]: {
    fields: { payment_id: S, order_id: S, amount: N, currency: S, method: S, transaction_id: S },
    sample: () => ({ payment_id: 'p', order_id: 'o', amount: 5, currency: 'USD', method: 'card', transaction_id: 't' }),
  },
  [`POST ${I}/billing/payments/failed`]: {
    fields: { payment_id: S, order_id: S, amount: N, method: S, reason: S },
    sample: () => ({ payment_id: 'p', order_id: 'o', amount: 5, method: 'card', reason: 'r' }),
  },
  [`POST ${I}/billing/renewals`]: { fields: { trigger: S }, sample: () => ({ trigger: 'manual' }) },
  [`POST ${I}/operators/:user_id/status`]: { fields: { status: S, status_text: SN, status_emoji: SN }, sample: () => ({ status: 'online', status_text: null }) },
  [`POST ${I}/tickets/:id/assign`]: { fields: { operator_id: S, operator_name: S, operator_avatar_url: SN }, sample: () => ({ operator_id: 'op-1', operator_name: 'Op' }) },
  [`POST ${I}/tickets/:id/transfer`]: {
    fields: { department_id: S, department_name: S, operator_id: SN, operator_name: SN },
    sample: () => ({ department_id: 'd1', department_name: 'Dep', operator_id: null }),
  },
  [`POST ${I}/tickets/:id/force-take`]: { fields: { operator_id: S }, sample: () => ({ operator_id: 'op-2' }) },
  [`POST ${I}/tickets/:id/rate`]: { fields: { rating: N }, sample: () => ({ rating: 4 }) },
  [`POST ${I}/tickets/:id/messages`]: {
    fields: { sender: S, content: S, media_ids: A, operator_id: S, operator_name: SN, is_internal: B },
    sample: () => ({ sender: 'operator', content: 'x', operator_id: 'op-1', is_internal: false }),
  },
  [`PATCH ${I}/tickets/:id/messages/:message_id`]: { fields: { content: S }, sample: () => ({ content: 'edited' }) },
  [`POST ${I}/tickets/:id/messages/:message_id/reactions`]: {
    fields: { reactor_kind: S, reactor_id: S, emoji: S },
    sample: () => ({ reactor_kind: 'operator', reactor_id: 'op-1', emoji: '+1' }),
  },
  [`POST ${I}/tickets/:id/reply-waiting`]: {
    fields: { message_id: S, operator_name: S, locale: S, surface: S, open_url: S },
    sample: (ids) => ({ message_id: first(ids, 'message'), operator_name: 'Op' }),
  },
  [`POST ${I}/contacts/identify`]: { fields: CONTACT, sample: () => ({ email: 'i@example.com' }) },
  [`PUT ${I}/widget`]: { fields: { visitor_notifications: B }, sample: () => ({ visitor_notifications: true }) },
};

/** Values of the wrong JSON type that a lenient decoder might take for the right one ("5" for 5, "true" for true, 1 for true…). */
const NEAR_MISSES: readonly unknown[] = ['5', '1', ' 3 ', '-0', '1e0', '0x1', 'true', 'false', 'null', '[]', '{}', '', 1, 0, 5, true, false, null, [], {}, ['ticket.created'], 'ticket.created', [{}], { plan: 'team', price: 1 }];

const GENERIC_FIELDS = ['title', 'body', 'subject', 'content', 'url', 'name', 'status', 'contact', 'email', 'rating', 'file'];
const fieldsOf = (route: Route): string[] => Object.keys(SCHEMAS[route.key]?.fields ?? {}).concat(SCHEMAS[route.key] === undefined ? GENERIC_FIELDS : []);
const PROTO_KEYS = ['__proto__', 'constructor', 'prototype'];

// ---------------------------------------------------------------------------------------------
// Bodies: small descriptions (so that a counterexample prints short), rendered to bytes on sending

type BodyCase =
  | { readonly kind: 'none' }
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'bytes'; readonly bytes: readonly number[] }
  | { readonly kind: 'badUtf8'; readonly field: string; readonly seq: readonly number[] }
  | { readonly kind: 'huge'; readonly field: string; readonly bytes: number; readonly unit: string }
  | { readonly kind: 'deep'; readonly shape: 'array' | 'object' | 'open'; readonly depth: number; readonly field: string | null }
  | { readonly kind: 'wide'; readonly field: string | null; readonly count: number; readonly item: 'same' | 'distinct' | 'number' | 'object' };

const render = (body: BodyCase): Buffer | null => {
  switch (body.kind) {
    case 'none':
      return null;
    case 'text':
      return Buffer.from(body.text, 'utf8');
    case 'bytes':
      return Buffer.from(body.bytes);
    case 'badUtf8':
      return Buffer.concat([Buffer.from(`{${JSON.stringify(body.field)}:"ab`), Buffer.from(body.seq), Buffer.from('cd"}')]);
    case 'huge': {
      const unitBytes = Buffer.byteLength(body.unit);
      return Buffer.from(`{${JSON.stringify(body.field)}:"${body.unit.repeat(Math.max(0, Math.floor(body.bytes / unitBytes)))}"}`);
    }
    case 'deep': {
      const [open, close] = body.shape === 'object' ? ['{"a":', '}'] : ['[', ']'];
      const nested = `${open.repeat(body.depth)}${body.shape === 'object' ? '1' : ''}${body.shape === 'open' ? '' : close.repeat(body.depth)}`;
      return Buffer.from(body.field === null ? nested : `{${JSON.stringify(body.field)}:${nested}}`);
    }
    case 'wide': {
      // Many array items in a field, or (no field) many keys in the object itself.
      const item = (i: number) => (body.item === 'same' ? '"ticket.created"' : body.item === 'distinct' ? `"e${i}"` : body.item === 'number' ? String(i) : '{}');
      const items = Array.from({ length: body.count }, (_, i) => (body.field === null ? `"k${i}":${item(i)}` : item(i))).join(',');
      return Buffer.from(body.field === null ? `{${items}}` : `{${JSON.stringify(body.field)}:[${items}]}`);
    }
  }
};

const LITERAL_BODIES = [
  'null', 'true', '0', '-0', '1e400', '"x"', '""', '[]', '{}', '[{}]', ' ', '\r\n', '\ufeff{}', '\u0000',
  '{"a":1}{"b":2}', '{"a":1,}', "{'a':1}", '{"a":1,"a":2}', 'NaN', 'undefined', '<x/>', 'a=1&b=2',
  '{"__proto__":{"polluted":"yes"}}', '{"constructor":{"prototype":{"polluted":"yes"}}}', '{"prototype":{"polluted":"yes"}}',
  '{"__proto__":null}', '[{"__proto__":{"polluted":"yes"}}]', '{"x":"\\ud800"}', '{"x":"a\u0000b"}',
  '--b\r\nContent-Disposition: form-data; name="file"; filename="a"\r\n\r\nx\r\n--b--\r\n',
];

const BAD_UTF8: readonly (readonly number[])[] = [[0xff], [0xfe, 0xff], [0x80], [0xc0, 0x80], [0xc0, 0xaf], [0xe0, 0x80, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe2, 0x82], [0xc3]];

/** A JSON object written out by hand, so that `__proto__` is a key like any other and keys may repeat. */
const objectText = (entries: readonly (readonly [string, unknown])[]): string => `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`;

const bodyCase = (fields: readonly string[]): fc.Arbitrary<BodyCase> => {
  const field = fc.constantFrom(...fields);
  return fc.oneof(
    { weight: 2, arbitrary: fc.constant<BodyCase>({ kind: 'none' }) },
    { weight: 3, arbitrary: fc.constantFrom(...LITERAL_BODIES).map((text): BodyCase => ({ kind: 'text', text })) },
    { weight: 3, arbitrary: fc.jsonValue({ maxDepth: 4 }).map((v): BodyCase => ({ kind: 'text', text: JSON.stringify(v) ?? 'null' })) },
    {
      weight: 6,
      arbitrary: fc
        .array(fc.tuple(fc.oneof({ weight: 5, arbitrary: field }, { weight: 1, arbitrary: fc.constantFrom(...PROTO_KEYS) }), fc.jsonValue({ maxDepth: 3 })), { maxLength: 6 })
        .map((entries): BodyCase => ({ kind: 'text', text: objectText(entries) })),
    },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 80 }).map((text): BodyCase => ({ kind: 'text', text })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 200 }).map((bytes): BodyCase => ({ kind: 'bytes', bytes: [...bytes] })) },
    { weight: 2, arbitrary: fc.record({ field, seq: fc.constantFrom(...BAD_UTF8) }).map((r): BodyCase => ({ kind: 'badUtf8', ...r })) },
    {
      weight: 1,
      arbitrary: fc
        .record({
          field,
          bytes: fc.oneof(fc.integer({ min: 1, max: BODY_LIMIT + 4096 }), fc.constantFrom(BODY_LIMIT - 64, BODY_LIMIT - 16, BODY_LIMIT + 1)),
          unit: fc.constantFrom('x', 'é', '\\u0000', '\\"', '😀'),
        })
        .map((r): BodyCase => ({ kind: 'huge', ...r })),
    },
    {
      weight: 1,
      arbitrary: fc
        .record({ shape: fc.constantFrom('array' as const, 'object' as const, 'open' as const), depth: fc.oneof(fc.integer({ min: 1, max: 10_000 }), fc.constantFrom(10_000, 100_000)), field: fc.option(field, { nil: null }) })
        .map((r): BodyCase => ({ kind: 'deep', ...r })),
    },
    {
      weight: 1,
      arbitrary: fc
        .record({ field: fc.option(field, { nil: null }), count: fc.integer({ min: 0, max: 60_000 }), item: fc.constantFrom('same' as const, 'distinct' as const, 'number' as const, 'object' as const) })
        .map((r): BodyCase => ({ kind: 'wide', ...r })),
    },
  );
};

/** Content types, each with how a body-reading route must treat it: as JSON, as no type, as not JSON, or either way. */
type TypeClass = 'json' | 'none' | 'other' | 'either';
const CONTENT_TYPES: readonly (readonly [string | null, TypeClass])[] = [
  ['application/json', 'json'],
  ['application/json', 'json'],
  ['application/json; charset=utf-8', 'json'],
  ['APPLICATION/JSON', 'json'],
  ['application/merge-patch+json', 'json'],
  ['application/vnd.api+json', 'json'],
  [null, 'none'],
  [null, 'none'],
  ['', 'either'],
  ['text/plain', 'other'],
  ['application/x-www-form-urlencoded', 'other'],
  ['application/xml', 'other'],
  ['multipart/form-data', 'other'],
  ['multipart/form-data; boundary=b', 'other'],
  ['image/png', 'other'],
  ['application/json; charset=latin1', 'either'],
  ['application/json; charset=utf-16', 'either'],
  ['application/json, text/plain', 'either'],
  ['application/', 'either'],
  [';;;', 'either'],
  ['\xe9/\xff', 'either'],
];

const classOf = (type: string | null): TypeClass => CONTENT_TYPES.find(([t]) => t === type)?.[1] ?? 'either';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Whether a route that reads a JSON object body must refuse these bytes (answer anything but 2xx):
 * no body, a body over the limit, bytes that are not UTF-8 JSON, JSON that is not an object, an
 * unknown field (prototype keys included) or a field of a JSON type it does not take (README: JSON
 * bodies refuse unknown fields; a body that is not JSON is a 422), or a declared type that is not JSON.
 */
const mustRefuse = (route: Route, bytes: Buffer | null, type: TypeClass): boolean => {
  const schema = SCHEMAS[route.key];
  if (schema === undefined) return false;
  if (bytes === null || bytes.length === 0 || bytes.length > BODY_LIMIT) return true;
  let value: unknown;
  try {
    value = JSON.parse(strictUtf8.decode(bytes));
  } catch {
    return true;
  }
  if (jsonTypeOf(value) !== 'object') return true;
  for (const [k, v] of Object.entries(value as object)) {
    // (hasOwn: a body's `constructor` key must not find Object.prototype.constructor here either)
    if (!Object.hasOwn(schema.fields, k) || !(schema.fields[k] ?? []).includes(jsonTypeOf(v))) return true;
  }
  return type === 'other';
};

const describeBody = (bytes: Buffer | null): string =>
  bytes === null ? 'no body' : bytes.length > 300 ? `${bytes.length} bytes starting ${JSON.stringify(bytes.subarray(0, 120).toString('latin1'))}` : JSON.stringify(bytes.toString('latin1'));

// ---------------------------------------------------------------------------------------------
// Queries, headers, paths

const QUERY_KEYS = ['page', 'page_size', 'status', 'offset', 'types', 'limit', 'timeout', 'contact_id', 'q', '__proto__', 'constructor', 'toString', 'hasOwnProperty', ''];
const QUERY_VALUES = [
  '', '-1', '0', '1', '100', '101', '1e3', '1.5', '0x10', '+1', '%201', '1%20', '9'.repeat(30), 'NaN', 'Infinity', '-0', 'true', 'null',
  '%zz', '%', '%0', '%00', '%ff', '%C3%A9', '%E2%80%AE', '%F0%9F%98%80', 'open', 'OPEN', 'closed,open', 'ticket.created', 'ticket.created,,nope',
  'a%26b%3Dc', '%2C', '[]', '{}', '"', '<script>', 'a+b',
];
/** Printable ASCII without space and '#': what may stand in a request target as is. */
const targetChars = (maxLength: number) => fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).filter((c) => c !== 0x23).map((c) => String.fromCharCode(c)), maxLength });

const queryString: fc.Arbitrary<string> = fc
  .oneof(
    fc
      .array(
        fc.tuple(
          fc.tuple(fc.constantFrom(...QUERY_KEYS), fc.constantFrom('', '', '', '[]', '[b]', '[b][c]', '.x', '%5B%5D')).map(([k, s]) => k + s),
          fc.option(fc.oneof(fc.constantFrom(...QUERY_VALUES), targetChars(20), fc.string({ unit: 'binary', maxLength: 8 }).map((s) => pct(s))), { nil: null }),
        ),
        { maxLength: 6 },
      )
      .map((pairs) => pairs.map(([k, v]) => (v === null ? k : `${k}=${v}`)).join('&')),
    targetChars(60),
    fc.constantFrom('&', '&&&', '=', '==', '?', '??a=1', 'a=1&a=2&a=3', 'page=1&page=2', 'offset=-1', 'limit=1e3', 'a[b]=c', 'a[b][c]=d', '%zz', '%=%', 'page_size=100&page_size=101', 'types=a&types=b&types=ticket.created'),
    fc.tuple(fc.constantFrom(...QUERY_KEYS), fc.integer({ min: 1000, max: 10_000 })).map(([k, n]) => `${k}=${'9'.repeat(n)}`),
  )
  .map((q) => q.slice(0, 12_000));

/** The target for a path and query; a long poll is told not to wait (a repeated `timeout` is a 422 at once). */
const targetOf = (route: Route, path: string, query: string): string => {
  const q = route.path === '/api/v1/updates' ? (query === '' ? 'timeout=0' : `${query}&timeout=0`) : query;
  return q === '' ? path : `${path}?${q}`;
};

/** What Node hands the app for a header sent with these values: each trimmed, repeats joined by ", ". */
const headerSeen = (values: readonly string[]): string => values.map((v) => v.replace(/^[ \t]+|[ \t]+$/g, '')).join(', ');

// ---------------------------------------------------------------------------------------------

describe('hostile input on every route (property, e2e)', function () {
  this.timeout(180_000);
  let ts: TestService;
  /** The caller on /api/v1. */
  let ws: TestWorkspace;
  /** The workspace no request may change: its ids stand in paths and bodies, its key is never sent. */
  let other: TestWorkspace;
  /** Whose key is "another workspace's key" in Authorization. */
  let third: TestWorkspace;
  /** The workspace the admin and internal routes act on (so that blocking it or changing its plan spoils nothing). */
  let adminTarget: TestWorkspace;
  let routes: Route[] = [];
  const own: { api: Ids; admin: Ids } = { api: {}, admin: {} };
  let foreign: Ids = {};
  let otherBaseline: string;
  const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort().join(',');

  const credentialOf = (route: Route): string => (route.surface === 'admin' ? ADMIN_TOKEN : ws.apiKey);
  const ownIds = (route: Route): Ids => (route.surface === 'admin' ? own.admin : own.api);
  /** The route's own path parameters: ids of the caller's records under which it can succeed. */
  const canonicalValues = (route: Route): readonly string[] =>
    SCHEMAS[route.key]?.params?.(ownIds(route)) ?? paramKinds(route.path).map((kind) => first(ownIds(route), kind));
  const canonical = (route: Route): string => fill(route.path, canonicalValues(route));
  const takesNoBody = (route: Route) => SCHEMAS[route.key] === undefined && !['GET', 'HEAD'].includes(route.method) && route.key !== 'POST /api/v1/media/upload';
  const refusedForContentType = (reply: RawReply) =>
    reply.status === 422 && JSON.stringify((reply.json as { detail?: { loc?: unknown }[] } | undefined)?.detail?.[0]?.loc) === '["header","content-type"]';
  const isMediaDownload = (route: Route) => route.method === 'GET' && route.path === '/api/v1/media/:media_id';
  /** Prometheus' text format, the one success that is not JSON besides a download. */
  const isMetrics = (route: Route) => route.path === '/admin/v1/metrics';

  /** A workspace's records, made through its own API; ids by kind. */
  const seed = async (w: TestWorkspace): Promise<Ids> => {
    const ids: Ids = { workspace: [w.workspaceId] };
    const add = (kind: string, id: unknown) => {
      if (typeof id === 'string') (ids[kind] ??= []).push(id);
    };
    const webhook = await w.api('POST', '/api/v1/webhooks', { url: 'http://127.0.0.1:9/hook', description: 'seed' });
    add('webhook', webhook.body.id);
    for (const subject of ['open', 'closed']) {
      const ticket = await w.api('POST', '/api/v1/tickets', { contact: { email: `${subject}@example.com` }, subject, message: 'hello' });
      expect(ticket.status, JSON.stringify(ticket.body)).to.equal(201);
      add('ticket', ticket.body.id);
      add('contact', ticket.body.contact_id);
      if (subject === 'closed') expect((await w.api('POST', `/api/v1/tickets/${String(ticket.body.id)}/close`)).status).to.equal(200);
    }
    const ticketId = first(ids, 'ticket');
    add('message', (await w.api('POST', `/api/v1/tickets/${ticketId}/messages`, { content: 'seed message' })).body.id);
    for (const m of (await w.api('GET', `/api/v1/tickets/${ticketId}/messages`)).body.items ?? []) if (!(ids['message'] ?? []).includes(m.id)) add('message', m.id);
    add('article', (await w.api('POST', '/api/v1/articles', { title: 'seed', body: 'seed' })).body.id);
    add('contact', (await w.api('POST', '/api/v1/contacts', { email: 'contact@example.com' })).body.id);
    const form = new FormData();
    form.append('file', new Blob(['seed file']), 'seed.txt');
    const upload = await fetch(`${ts.url}/api/v1/media/upload`, { method: 'POST', headers: { authorization: `Bearer ${w.apiKey}` }, body: form });
    if (upload.status === 201) add('media', ((await upload.json()) as { id?: unknown }).id);
    // The ticket events were delivered (and failed) at once; their deliveries are the ids to retry.
    for (let i = 0; i < 100 && (ids['delivery'] ?? []).length === 0; i += 1) {
      for (const d of (await w.api('GET', `/api/v1/webhooks/${first(ids, 'webhook')}/deliveries`)).body.items ?? []) add('delivery', d.id);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    add('user', 'op-1');
    add('reactor', 'op-1');
    return ids;
  };

  /** Everything the other workspace's own key shows, and its events in the log. */
  const otherSnapshot = async (): Promise<string> => {
    const ids = foreign;
    const views: unknown[] = [];
    for (const path of [
      '/api/v1/tickets',
      ...(ids['ticket'] ?? []).flatMap((t) => [`/api/v1/tickets/${t}`, `/api/v1/tickets/${t}/messages`]),
      ...(ids['contact'] ?? []).map((c) => `/api/v1/contacts/${c}`),
      '/api/v1/articles',
      ...(ids['article'] ?? []).map((a) => `/api/v1/articles/${a}`),
      '/api/v1/webhooks',
      ...(ids['webhook'] ?? []).map((h) => `/api/v1/webhooks/${h}/deliveries`),
      '/api/v1/updates?timeout=0&limit=1000',
    ]) {
      const reply = await other.api('GET', path);
      views.push([path, reply.status, reply.body]);
    }
    for (const m of ids['media'] ?? []) {
      const reply = await fetch(`${ts.url}/api/v1/media/${m}`, { headers: { authorization: `Bearer ${other.apiKey}` } });
      views.push([m, reply.status, createHash('sha256').update(Buffer.from(await reply.arrayBuffer())).digest('hex')]);
    }
    const events: RecordedEvent[] = await ts.service.core.log.readAll({ after: 0, workspaceId: other.workspaceId });
    views.push(events.map((e) => `${e.position} ${e.type}`));
    return JSON.stringify(views);
  };

  before(async () => {
    ts = await startTestService({
      RATE_LIMIT_PER_KEY: '1000000000',
      RATE_LIMIT_PER_IP: '1000000000',
      // Nothing is retried during the run, so the other workspace stays still; a test delivery to whatever URL a
      // hostile PATCH left ends well within the answer deadline.
      WEBHOOK_RETRY_DELAYS: '6h,6h,6h,6h,6h',
      WEBHOOK_TIMEOUT_MS: '2000',
    });
    routes = routesOf(ts);
    ws = await ts.createWorkspace('business');
    other = await ts.createWorkspace('business');
    third = await ts.createWorkspace('business');
    adminTarget = await ts.createWorkspace('business');
    own.api = await seed(ws);
    foreign = await seed(other);
    own.admin = await seed(adminTarget);
    delete foreign['workspace']; // the admin token may do anything to a workspace it names: never name the other one
    const key = await ts.admin('POST', `/admin/v1/workspaces/${adminTarget.workspaceId}/keys`);
    own.admin['key'] = [String(key.body.key_id)];
    const operatorMessage = await ts.admin('POST', `/internal/v1/workspaces/${adminTarget.workspaceId}/tickets/${first(own.admin, 'ticket')}/messages`, {
      sender: 'operator',
      content: 'operator says',
      operator_id: 'op-1',
    });
    if (typeof operatorMessage.body?.id === 'string') own.admin['message']?.unshift(operatorMessage.body.id);
    // The other workspace is still once its one round of deliveries is recorded.
    otherBaseline = await otherSnapshot();
    for (let i = 0; i < 50; i += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const again = await otherSnapshot();
      if (again === otherBaseline) break;
      otherBaseline = again;
    }
  });

  after(async () => {
    await ts.close();
  });

  // -------------------------------------------------------------------------------------------
  // One request and the checks that hold for every answer

  interface Exchange {
    readonly reply: RawReply;
    /** Events appended while the request ran, deliveries (background work) left out. */
    readonly writes: readonly RecordedEvent[];
    readonly label: string;
  }

  const send = async (route: Route | null, method: string, target: string, headers: readonly (readonly [string, string])[], body: Buffer | null, chunked = false): Promise<Exchange> => {
    const label = `${method} ${target.length > 300 ? `${target.slice(0, 300)}… (${target.length} chars)` : target}\n  headers ${JSON.stringify(headers).slice(0, 400)}\n  body ${describeBody(body)}${chunked ? ' (chunked)' : ''}`;
    const head = await ts.service.core.log.headPosition();
    // A connection of its own, kept alive: the request's failure is its own, and the next request on it shows
    // whether the server left the connection usable.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let reply: RawReply;
    let next: RawReply | Error;
    try {
      const payload = body === null ? undefined : chunked ? (body.length === 0 ? [] : [body.subarray(0, 16), body.subarray(16)]) : body;
      reply = await sendRaw(ts.url, { method, target, headers, ...(payload === undefined ? {} : { body: payload }), timeoutMs: ANSWER_WITHIN_MS, agent });
      next = await sendRaw(ts.url, { method: 'GET', target: '/healthz', timeoutMs: NEXT_ANSWER_WITHIN_MS, agent }).catch((error: Error) => error);
    } catch (error) {
      throw new Error(`${label}\n  → ${(error as Error).message}`);
    } finally {
      agent.destroy();
    }
    const written = await ts.service.core.log.readAll({ after: head });
    const seen = `${label}\n  → ${reply.status} ${JSON.stringify(reply.headers)}\n    ${reply.text.slice(0, 400)}`;
    expect(
      written.filter((e) => e.workspaceId === other.workspaceId).map((e) => e.type),
      `${seen}\n  wrote to another workspace`,
    ).to.deep.equal([]);
    expectContractAnswer(route, method, reply, seen);
    const writes = written.filter((e) => !e.type.startsWith('delivery.'));
    // Public events go out to webhooks and /updates: a request that failed must not have announced anything.
    const announced = writes.filter((e) => isPublicEventType(e.type));
    if (reply.status >= 400) expect(announced.map((e) => `${e.type} ${JSON.stringify(e.data)}`), `${seen}\n  an error answer, yet public events were written`).to.deep.equal([]);
    expect(next instanceof Error ? next.message : next.status, `${seen}\n  the next request on the same connection (GET /healthz)`).to.equal(200);
    return { reply, writes, label: seen };
  };

  const expectContractAnswer = (route: Route | null, method: string, reply: RawReply, label: string) => {
    const { status } = reply;
    expect(reply.elapsedMs, label).to.be.below(ANSWER_WITHIN_MS);
    if (status >= 500) {
      expect(status, `${label}\n  a 5xx other than 503`).to.equal(503);
      expect(errorFormatOf(reply.json), `${label}\n  a 503 outside the business envelope`).to.equal('business');
    }
    const requestId = reply.headers['x-request-id'];
    expect(requestId, `${label}\n  X-Request-ID`).to.be.a('string').that.matches(VALID_REQUEST_ID);
    if (status === 401) expect(reply.headers['www-authenticate'], `${label}\n  401 challenge`).to.equal('Bearer');
    if (method === 'HEAD') {
      expect(reply.body.length, `${label}\n  an answer to HEAD with a body`).to.equal(0);
      return;
    }
    if (status >= 300 && status < 400) {
      expect(route !== null && isMediaDownload(route) && status === 302, `${label}\n  a redirect`).to.equal(true);
      return;
    }
    if (status >= 400) {
      expect(reply.headers['content-type'] ?? '', `${label}\n  error content type`).to.match(/json/);
      const format = errorFormatOf(reply.json);
      expect(format, `${label}\n  error body in none of the three formats`).to.not.equal(null);
      if (format === 'business') expect((reply.json as { request_id: unknown }).request_id, `${label}\n  request_id`).to.equal(requestId);
      return;
    }
    expect(status, label).to.be.at.least(200);
    if (status === 204) {
      expect(reply.body.length, `${label}\n  204 with a body`).to.equal(0);
      return;
    }
    if (route !== null && isMediaDownload(route) && method === 'GET') return;
    if (route !== null && isMetrics(route)) {
      expect(reply.headers['content-type'] ?? '', `${label}\n  metrics content type`).to.match(/^text\/plain; version=0\.0\.4/);
      return;
    }
    expect(reply.headers['content-type'] ?? '', `${label}\n  success content type`).to.match(/json/);
    expect(reply.json, `${label}\n  success body is not JSON`).to.not.equal(undefined);
  };

  /** Path parameter values: ids of the caller's workspace, of the other workspace, and hostile segments (already encoded). */
  const paramValue = (route: Route, kind: string): fc.Arbitrary<string> => {
    const mine = ownIds(route)[kind] ?? [];
    const theirs = foreign[kind] ?? [];
    // Variants of real ids (an encoded one names the record itself); never a workspace id, which the admin token may change.
    const all = [...new Set([own.api, foreign].flatMap((ids) => Object.entries(ids).flatMap(([k, v]) => (k === 'workspace' ? [] : v))))];
    const hostile = fc.oneof(
      fc.string({ unit: 'binary', maxLength: 40 }).map((s) => pct(s)),
      targetChars(30).map((s) => s.replace(/[/?]/g, '')),
      fc.constantFrom('..', '.', '%2e%2e', '%2E', '%2F', '%5C', '%00', '%zz', '%', '%ff', '%C0%AF', '%E2%80%AE', ';x=1', 'null', 'undefined', '__proto__', 'constructor', 'prototype', 'hasOwnProperty', '-1', '1e3', 'NaN', '0'.repeat(32), 'f'.repeat(32), '%20'),
      fc.tuple(fc.constantFrom(...all), fc.constantFrom('upper', 'space', 'short', 'long', 'encoded', 'nul')).map(([id, how]) =>
        how === 'upper' ? id.toUpperCase() : how === 'space' ? `${id}%20` : how === 'short' ? id.slice(0, -1) : how === 'long' ? `${id}0` : how === 'encoded' ? pct(id, true) : `${id}%00`,
      ),
      fc.integer({ min: 1000, max: 8000 }).map((n) => 'a'.repeat(n)),
    );
    return fc.oneof(
      ...(mine.length > 0 ? [{ weight: 5, arbitrary: fc.constantFrom(...mine) }] : []),
      ...(theirs.length > 0 ? [{ weight: 2, arbitrary: fc.constantFrom(...theirs) }] : []),
      { weight: 3, arbitrary: hostile },
    );
  };
  const pathOf = (route: Route): fc.Arbitrary<string> => fc.tuple(...paramKinds(route.path).map((kind) => paramValue(route, kind))).map((values) => fill(route.path, values));

  /** Runs one check of a sweep; a failure is noted in one line (request, answer, reason) and the sweep goes on. */
  const collect = async (failures: string[], name: string, check: () => Promise<void>) => {
    try {
      await check();
    } catch (error) {
      const lines = (error as Error).message.split('\n').map((l) => l.trim());
      if (lines.length === 1) {
        failures.push(`[${name}] ${lines[0] ?? ''}`);
        return;
      }
      const at = lines.findIndex((l) => l.startsWith('→'));
      const answer = at < 0 ? '' : ` ${(lines[at] ?? '').replace(/ \{.*$/, '')} ${(lines[at + 1] ?? '').slice(0, 160)}`;
      failures.push(`[${name}] ${(lines[0] ?? '').slice(0, 160)}${answer} — ${lines.at(-1) ?? ''}`);
    }
  };

  const withRoute = <T>(make: (route: Route) => fc.Arbitrary<T>): fc.Arbitrary<{ route: Route; input: T }> =>
    fc.constantFrom(...routes).chain((route) => make(route).map((input) => ({ route, input })));

  const authHeader = (route: Route): [string, string][] => (route.surface === 'open' ? [] : [['Authorization', `Bearer ${credentialOf(route)}`]]);

  // -------------------------------------------------------------------------------------------

  it('finds routes on every surface, and knows the body of every route that reads one', () => {
    expect(new Set(routes.map((r) => r.surface))).to.have.keys('api', 'admin', 'open');
    expect(routes.map((r) => r.key)).to.include.members(['POST /api/v1/media/upload', 'GET /api/v1/updates', 'GET /healthz']);
    const missing = Object.keys(SCHEMAS).filter((key) => !routes.some((r) => r.key === key));
    expect(missing, 'SCHEMAS names routes the service no longer has').to.deep.equal([]);
    expect(Object.keys(own.api)).to.include.members(['ticket', 'contact', 'message', 'article', 'webhook', 'delivery']);
  });

  it('answers a fixed set of hostile bodies and queries on every route', async () => {
    const named: [string, Buffer | null, string | null, boolean?][] = [
      ['no body', null, null],
      ['empty', Buffer.alloc(0), 'application/json'],
      ['empty, no content type', Buffer.alloc(0), null],
      ['empty chunked, no content type', Buffer.alloc(0), null, true],
      ['empty chunked', Buffer.alloc(0), 'application/json', true],
      ...['null', '[]', '"x"', '0', 'true', '{}', ' ', '\ufeff{}', '{"a":1}{"b":2}', "{'a':1}"].map((t): [string, Buffer, string] => [t, Buffer.from(t), 'application/json']),
      ...PROTO_KEYS.map((k): [string, Buffer, string] => [`${k} key`, Buffer.from(`{"${k}":{"polluted":"yes"}}`), 'application/json']),
      ['deep arrays', render({ kind: 'deep', shape: 'array', depth: 10_000, field: null }), 'application/json'],
      ['deep objects', render({ kind: 'deep', shape: 'object', depth: 10_000, field: null }), 'application/json'],
      ['deep unclosed', render({ kind: 'deep', shape: 'open', depth: 10_000, field: null }), 'application/json'],
      ['deeper arrays', render({ kind: 'deep', shape: 'array', depth: 100_000, field: 'title' }), 'application/json'],
      ['invalid UTF-8', render({ kind: 'badUtf8', field: 'title', seq: [0xc0, 0xaf] }), 'application/json'],
      ['just under the limit', render({ kind: 'huge', field: 'title', bytes: BODY_LIMIT - 64, unit: 'x' }), 'application/json'],
      ['just over the limit', render({ kind: 'huge', field: 'title', bytes: BODY_LIMIT + 1, unit: 'x' }), 'application/json'],
      ['no content type', Buffer.from('{"title":"x"}'), null],
      ['text/plain', Buffer.from('{"title":"x"}'), 'text/plain'],
      ['multipart without boundary', Buffer.from('--b\r\n\r\nx\r\n--b--'), 'multipart/form-data'],
    ];
    const failures: string[] = [];
    for (const route of routes) {
      for (const [name, bytes, type, chunked = false] of named) {
        await collect(failures, name, async () => {
          const headers: [string, string][] = [...authHeader(route), ...(type === null ? [] : [['Content-Type', type] as [string, string]])];
          const { reply, label } = await send(route, route.method, targetOf(route, canonical(route), ''), headers, bytes, chunked);
          if (mustRefuse(route, bytes, classOf(type))) expect(reply.status, `${label}\n  accepted`).to.not.be.within(200, 299);
          // Zero bytes are no body, whatever their framing: a route that reads none has nothing to refuse.
          if (takesNoBody(route) && (bytes === null || bytes.length === 0)) expect(refusedForContentType(reply), `${label}\n  an empty body refused for its type`).to.equal(false);
        });
      }
    }
    const queries = ['a=1&a=2', 'a[b]=c', '%zz', '%', '==', 'offset=-1', 'limit=1e3', 'page=0', 'page_size=101', 'page=1&page=2', 'types=nope', 'status=OPEN', '__proto__=1', 'constructor[prototype][x]=1', `q=${'x'.repeat(10_000)}`, '%F0%9F%98%80=%E2%80%AE', '&&&', '?'];
    for (const route of routes.filter((r) => r.method === 'GET' || r.method === 'HEAD')) {
      for (const query of queries) await collect(failures, `?${query.slice(0, 30)}`, async () => void (await send(route, route.method, targetOf(route, canonical(route), query), authHeader(route), null)));
    }
    expect(failures, `${failures.length} answers broke the contract`).to.deep.equal([]);
  });

  it('treats prototype names (__proto__, constructor, …) as ids like any other, in paths and in id fields', async () => {
    // Differential: a prototype name must get the answer, and write the events, that an unknown id of the same place gets.
    const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty'];
    let fresh = 0;
    const failures: string[] = [];
    const outcome = async (route: Route, path: string, body: Buffer | null): Promise<string> => {
      const headers: [string, string][] = [...authHeader(route), ...(body === null ? [] : [['Content-Type', 'application/json'] as [string, string]])];
      const { reply, writes } = await send(route, route.method, targetOf(route, path, ''), headers, body);
      return `${reply.status} [${writes.map((e) => e.type).join(', ')}]`;
    };
    const bodyOf = (route: Route, change: Record<string, unknown> = {}) => {
      const schema = SCHEMAS[route.key];
      return schema === undefined ? null : Buffer.from(JSON.stringify({ ...schema.sample(ownIds(route)), ...change }));
    };
    for (const route of routes.filter((r) => r.path.includes('/:') && r.method !== 'HEAD')) {
      const names = route.path.match(/:[A-Za-z_]+/g) ?? [];
      const values = canonicalValues(route);
      for (const [i, param] of names.entries()) {
        const at = (v: string) => fill(route.path, values.map((x, j) => (j === i ? v : x)));
        for (const name of NAMES) {
          await collect(failures, `${param} = ${name}`, async () => {
            const unknown = await outcome(route, at(`nx-${(fresh += 1)}`), bodyOf(route));
            const odd = await outcome(route, at(name), bodyOf(route));
            expect(odd, `${route.key} with ${param} = ${name}, against an unknown id`).to.equal(unknown);
          });
        }
      }
    }
    for (const route of routes.filter((r) => ['reactor_id', 'message_id', 'ticket_id'].some((f) => Object.hasOwn(SCHEMAS[r.key]?.fields ?? {}, f)))) {
      const field = ['reactor_id', 'message_id', 'ticket_id'].find((f) => Object.hasOwn(SCHEMAS[route.key]?.fields ?? {}, f)) as string;
      for (const name of NAMES) {
        await collect(failures, `${field} = ${name}`, async () => {
          const id = `nx-${(fresh += 1)}`;
          // Twice each: the second request shows whether the first one's effect was recorded where it belongs.
          const unknown = [await outcome(route, canonical(route), bodyOf(route, { [field]: id })), await outcome(route, canonical(route), bodyOf(route, { [field]: id }))].join(' then ');
          const odd = [await outcome(route, canonical(route), bodyOf(route, { [field]: name })), await outcome(route, canonical(route), bodyOf(route, { [field]: name }))].join(' then ');
          expect(odd, `${route.key} with ${field} = ${name} twice, against an unknown id`).to.equal(unknown);
        });
      }
    }
    expect(failures, `${failures.length} differences`).to.deep.equal([]);
  });

  it('answers bodies of any shape, size, depth and encoding, with any content type (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        withRoute((route) => fc.record({ path: pathOf(route), body: bodyCase(fieldsOf(route)), type: fc.constantFrom(...CONTENT_TYPES), chunked: fc.boolean() })),
        async ({ route, input }) => {
          const bytes = render(input.body);
          const [type, typeClass] = input.type;
          const headers: [string, string][] = [...authHeader(route), ...(type === null ? [] : [['Content-Type', type] as [string, string]])];
          const { reply, label } = await send(route, route.method, targetOf(route, input.path, ''), headers, bytes, input.chunked && bytes !== null && bytes.length > 1);
          // Whatever the path: a body the route must refuse is never what makes it succeed.
          if (mustRefuse(route, bytes, typeClass)) expect(reply.status, `${label}\n  a body it must refuse was accepted`).to.not.be.within(200, 299);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('refuses a field of the wrong JSON type, an unknown or prototype field, and another workspace\'s ids in a body (property)', async () => {
    const schemaRoutes = routes.filter((r) => SCHEMAS[r.key] !== undefined);
    const mutation = (route: Route) => {
      const schema = SCHEMAS[route.key] as BodySchema;
      const fields = Object.keys(schema.fields);
      const wrongType = fc
        .constantFrom(...fields)
        .chain((field) =>
          fc
            .oneof(fc.jsonValue({ maxDepth: 2 }), fc.constantFrom(...NEAR_MISSES))
            .filter((v) => !(schema.fields[field] ?? []).includes(jsonTypeOf(v)))
            .map((value) => ({ field, value, refuse: true })),
        );
      const unknown = fc.tuple(fc.constantFrom(...PROTO_KEYS, 'colour', 'id', 'workspace_id', 'Title'), fc.jsonValue({ maxDepth: 2 })).map(([field, value]) => ({ field, value, refuse: true }));
      const ids = foreign;
      const foreignIds = fc.constantFrom(
        { field: 'ticket_id', value: first(ids, 'ticket'), refuse: false },
        { field: 'message_id', value: first(ids, 'message'), refuse: false },
        // The contract: a file in media_ids that is not from this project is a 422.
        { field: 'media_ids', value: [first(ids, 'media')], refuse: true },
      ).filter(({ field }) => fields.includes(field));
      return fc.oneof(wrongType, unknown, ...(fields.some((f) => ['ticket_id', 'message_id', 'media_ids'].includes(f)) ? [foreignIds] : []));
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...schemaRoutes).chain((route) => mutation(route).map((change) => ({ route, change }))),
        async ({ route, change }) => {
          const sample = (SCHEMAS[route.key] as BodySchema).sample(ownIds(route));
          const entries = [...Object.entries(sample).filter(([k]) => k !== change.field), [change.field, change.value] as const];
          const bytes = Buffer.from(objectText(entries));
          const headers: [string, string][] = [...authHeader(route), ['Content-Type', 'application/json']];
          const { reply, label } = await send(route, route.method, targetOf(route, canonical(route), ''), headers, bytes);
          if (change.refuse) expect(reply.status, `${label}\n  accepted`).to.not.be.within(200, 299);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('answers odd query strings (property)', async () => {
    await fc.assert(
      fc.asyncProperty(withRoute((route) => fc.record({ path: pathOf(route), query: queryString })), async ({ route, input }) => {
        await send(route, route.method, targetOf(route, input.path, input.query), authHeader(route), null);
      }),
      { numRuns: RUNS },
    );
  });

  it('authenticates odd Authorization headers and echoes or replaces odd X-Request-IDs (property)', async () => {
    type Verdict = 'accept' | 'reject' | 'either' | 'third';
    const authCases = (route: Route): fc.Arbitrary<{ values: string[]; verdict: Verdict }> => {
      const cred = credentialOf(route);
      const wrongSurface = route.surface === 'api' ? ADMIN_TOKEN : ws.apiKey;
      const one = (value: string, verdict: Verdict) => ({ values: [value], verdict });
      return fc.oneof(
        fc.constantFrom(
          one(`Bearer ${cred}`, 'accept'),
          one(`bearer ${cred}`, 'accept'),
          one(`BEARER ${cred}`, 'accept'),
          one(`Bearer    ${cred}`, 'accept'),
          one(`   Bearer ${cred}   `, 'accept'),
          one(`Bearer\t${cred}`, 'either'),
          { values: [`Bearer ${cred}`, 'Basic eA=='], verdict: 'either' as Verdict },
          one(`Bearer ${third.apiKey}`, route.surface === 'api' ? 'third' : 'reject'),
        ),
        fc.constantFrom(
          { values: [], verdict: 'reject' as Verdict },
          one('', 'reject'),
          one(cred, 'reject'),
          one(`Basic ${cred}`, 'reject'),
          one(`Token ${cred}`, 'reject'),
          one('Bearer', 'reject'),
          one('Bearer ', 'reject'),
          one(`Bearer ${cred} x`, 'reject'),
          one(`Bearer ${cred}x`, 'reject'),
          one(`Bearer x${cred}`, 'reject'),
          one(`Bearer ${cred.slice(0, -1)}`, 'reject'),
          one(`Bearer: ${cred}`, 'reject'),
          one(`Bearer=${cred}`, 'reject'),
          one(`Bearer,${cred}`, 'reject'),
          one(`${cred} Bearer`, 'reject'),
          one(`Bearer "${cred}"`, 'reject'),
          one(`Bearer ${cred}\xe9`, 'reject'),
          one(`Bearer ${wrongSurface}`, 'reject'),
        ),
        fc.integer({ min: 1, max: 8000 }).map((n) => one(`Bearer ${'a'.repeat(n)}`, 'reject')),
        fc.string({ unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)), minLength: 1, maxLength: 60 }).map((s) => one(`Bearer ${s}`, 'reject')),
        targetChars(80).map((s) => one(s, s.trim() === `Bearer ${cred}` ? 'accept' : 'reject')),
      );
    };
    const requestIds = fc.oneof(
      fc.constantFrom<string[]>([], [''], [' '], ['abc'], ['x'.repeat(200)], ['x'.repeat(201)], ['a b'], [' abc '], ['\tabc'], ['a\tb'], ['\xe9'], ['ok\x80'], ['a', 'b'], ['!~"#{}[]|\\^`']),
      fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 220 }).map((s) => [s]),
      fc.string({ unit: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 20 }).map((s) => [`id-${s}`]),
    );
    await fc.assert(
      fc.asyncProperty(
        withRoute((route) => fc.record({ path: fc.oneof({ weight: 3, arbitrary: fc.constant(canonical(route)) }, { weight: 1, arbitrary: pathOf(route) }), auth: authCases(route), requestId: requestIds })),
        async ({ route, input }) => {
          const schema = SCHEMAS[route.key];
          const body = schema === undefined ? null : Buffer.from(JSON.stringify(schema.sample(ownIds(route))));
          const headers: [string, string][] = [
            ...input.auth.values.map((v): [string, string] => ['Authorization', v]),
            ...input.requestId.map((v): [string, string] => ['X-Request-ID', v]),
            ...(body === null ? [] : [['Content-Type', 'application/json'] as [string, string]]),
          ];
          const target = targetOf(route, input.path, '');
          const { reply, writes, label } = await send(route, route.method, target, headers, body);
          // Long ids and a long credential together can pass node:http's limit on a request's head
          // (16 KiB): that request is refused unread, before its key or request id are looked at.
          if (reply.status === 431) {
            const head = Buffer.byteLength(`${route.method} ${target} HTTP/1.1\r\n`, 'latin1') + headers.reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v, 'latin1') + 4, 0);
            expect(head, `${label}\n  a 431 for a head within the limit`).to.be.greaterThan(HEAD_LIMIT - 1024);
            expect(writes.map((e) => e.type), `${label}\n  a refused request wrote`).to.deep.equal([]);
            return;
          }
          const sent = headerSeen(input.requestId);
          const answered = reply.headers['x-request-id'];
          if (input.requestId.length > 0 && VALID_REQUEST_ID.test(sent)) expect(answered, `${label}\n  a valid request id is echoed`).to.equal(sent);
          else expect(answered, `${label}\n  an invalid request id is replaced`).to.not.equal(sent);
          if (route.surface === 'open') return;
          if (input.auth.verdict === 'reject') {
            expect(reply.status, `${label}\n  a credential that is not one was let in`).to.equal(401);
            if (route.method !== 'HEAD') expect(errorFormatOf(reply.json), label).to.equal('short');
            expect(writes.map((e) => e.type), `${label}\n  a refused request wrote`).to.deep.equal([]);
          }
          if (input.auth.verdict === 'accept' || input.auth.verdict === 'third') expect(reply.status, `${label}\n  a working credential was refused`).to.not.equal(401);
          if (input.auth.verdict === 'third') {
            expect(writes.filter((e) => e.workspaceId !== third.workspaceId).map((e) => `${e.workspaceId} ${e.type}`), `${label}\n  another workspace's key wrote outside its workspace`).to.deep.equal([]);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('treats other spellings of every path as unknown routes, and encoded parameters as themselves (property)', async () => {
    type Change = 'flip' | 'upper' | 'pctLiteral' | 'double' | 'trailing' | 'leading' | 'dot' | 'dotdot' | 'pctDot' | 'encodedSlash' | 'semicolon' | 'backslash' | 'pctParam' | 'upperParam';
    const CHANGES: readonly Change[] = ['flip', 'upper', 'pctLiteral', 'double', 'trailing', 'leading', 'dot', 'dotdot', 'pctDot', 'encodedSlash', 'semicolon', 'backslash', 'pctParam', 'upperParam'];
    interface Segment {
      readonly text: string;
      readonly literal: boolean;
    }
    const segmentsOf = (route: Route): Segment[] => {
      let i = 0;
      const values = canonicalValues(route);
      return route.path
        .split('/')
        .slice(1)
        .map((s) => (s.startsWith(':') ? { text: values[i++] ?? 'x', literal: false } : { text: s, literal: true }));
    };
    /** One change of the path (`ambiguous`: the result may be a parameter value that some route takes). */
    const apply = (segments: Segment[], change: Change, at: number, lower: boolean): { segments: Segment[]; ambiguous?: boolean } => {
      const pick = (which: (s: Segment) => boolean) => {
        const indexes = segments.map((s, i) => (which(s) ? i : -1)).filter((i) => i >= 0);
        return indexes.length === 0 ? -1 : (indexes[at % indexes.length] as number);
      };
      const replace = (i: number, text: string): Segment[] => segments.map((s, j) => (j === i ? { ...s, text } : s));
      const insert = (i: number, ...texts: string[]): Segment[] => [...segments.slice(0, i), ...texts.map((text) => ({ text, literal: true })), ...segments.slice(i)];
      const inner = 1 + (at % Math.max(1, segments.length - 1));
      const hex = (c: string) => `%${c.charCodeAt(0).toString(16)[lower ? 'toLowerCase' : 'toUpperCase']()}`;
      switch (change) {
        case 'flip':
        case 'upper':
        case 'pctLiteral': {
          const i = pick((s) => s.literal && /[a-z]/i.test(s.text));
          if (i < 0) return { segments };
          const text = (segments[i] as Segment).text;
          const letters = [...text].map((c, k) => (/[a-z]/i.test(c) ? k : -1)).filter((k) => k >= 0);
          const k = letters[at % letters.length] as number;
          const c = text[k] as string;
          const next = change === 'upper' ? (text.toUpperCase() === text ? text.toLowerCase() : text.toUpperCase()) : text.slice(0, k) + (change === 'flip' ? (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) : hex(c)) + text.slice(k + 1);
          return { segments: replace(i, next) };
        }
        case 'double':
          return { segments: insert(inner, '') };
        case 'trailing':
          return { segments: [...segments, { text: '', literal: true }] };
        case 'leading':
          return { segments: [{ text: '', literal: true }, ...segments] };
        case 'dot':
          return { segments: insert(inner, '.') };
        case 'dotdot':
          return { segments: insert(inner, 'x', '..') };
        case 'pctDot':
          return { segments: insert(inner, 'x', lower ? '%2e%2e' : '%2E%2E') };
        case 'encodedSlash':
        case 'backslash': {
          if (segments.length < 2) return { segments };
          const i = at % (segments.length - 1);
          const [left, right] = [segments[i] as Segment, segments[i + 1] as Segment];
          const merged = `${left.text}${change === 'backslash' ? '\\' : lower ? '%2f' : '%2F'}${right.text}`;
          // Merged with a parameter, the segment is a parameter value (an odd id) that a route may well take.
          const param = !left.literal || !right.literal;
          return { segments: [...segments.slice(0, i), { text: merged, literal: !param }, ...segments.slice(i + 2)], ambiguous: param };
        }
        case 'semicolon': {
          const i = pick((s) => s.literal);
          return { segments: replace(i, `${(segments[i] as Segment).text};x=1`) };
        }
        case 'pctParam':
        case 'upperParam': {
          const i = pick((s) => !s.literal);
          if (i < 0) return { segments };
          const text = (segments[i] as Segment).text;
          return { segments: replace(i, change === 'pctParam' ? pct(text, true) : text.toUpperCase()) };
        }
      }
    };
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.array(fc.record({ change: fc.constantFrom(...CHANGES), at: fc.nat(50), lower: fc.boolean() }), { minLength: 1, maxLength: 3 }),
        async (route, changes) => {
          const spell = (which: readonly { change: Change; at: number; lower: boolean }[]) => {
            let segments = segmentsOf(route);
            let ambiguous = false;
            for (const { change, at, lower } of which) {
              const next = apply(segments, change, at, lower);
              segments = next.segments;
              ambiguous ||= next.ambiguous === true;
            }
            return { path: `/${segments.map((s) => s.text).join('/')}`, ambiguous };
          };
          const { path, ambiguous } = spell(changes);
          // The literal parts alone (two changes may undo each other): spelled otherwise, no route may take the path.
          const literal = spell(changes.filter((c) => c.change !== 'pctParam' && c.change !== 'upperParam')).path !== canonical(route);
          const schema = SCHEMAS[route.key];
          const body = schema === undefined ? null : Buffer.from(JSON.stringify(schema.sample(ownIds(route))));
          // A keyless route under /api/v1 is spelled otherwise with the key: without it, any other /api/v1 path is 401 first.
          const credential = route.surface === 'open' && route.path.startsWith('/api/v1/') ? [['Authorization', `Bearer ${ws.apiKey}`] as [string, string]] : authHeader(route);
          const headers: [string, string][] = [...credential, ...(body === null ? [] : [['Content-Type', 'application/json'] as [string, string]])];
          const { reply, writes, label } = await send(route, route.method, targetOf(route, path, ''), headers, body);
          if (literal && !ambiguous) {
            expect([404, 405], `${label}\n  another spelling reached a route`).to.include(reply.status);
            expect(writes.map((e) => e.type), `${label}\n  another spelling reached a handler that wrote`).to.deep.equal([]);
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it('keeps a connection usable after refusing an oversize chunked body', async () => {
    const body = render({ kind: 'huge', field: 'title', bytes: 2 * BODY_LIMIT, unit: 'x' });
    const route = routes.find((r) => r.key === 'POST /api/v1/articles') ?? null;
    const headers: [string, string][] = [['Authorization', `Bearer ${ws.apiKey}`], ['Content-Type', 'application/json']];
    // send() refuses a connection on which the next request (GET /healthz) is not answered.
    for (let i = 0; i < 3; i += 1) expect((await send(route, 'POST', '/api/v1/articles', headers, body, true)).reply.status).to.equal(413);
  });

  it("answers requests Node's parser refuses in the short form, with X-Request-ID", async () => {
    const key = `Authorization: Bearer ${ws.apiKey}\r\n`;
    const requests: [string, Buffer][] = [
      ['latin1 byte in the path', Buffer.from(`GET /api/v1/tickets/\xe9 HTTP/1.1\r\nHost: x\r\n${key}\r\n`, 'latin1')],
      ['UTF-8 in the query', Buffer.concat([Buffer.from('GET /api/v1/tickets?q='), Buffer.from('é', 'utf8'), Buffer.from(` HTTP/1.1\r\nHost: x\r\n${key}\r\n`)])],
      ['space in the path', Buffer.from(`GET /api/v1/tic kets HTTP/1.1\r\nHost: x\r\n${key}\r\n`)],
      ['control character in the path', Buffer.from(`GET /api/v1/\x01 HTTP/1.1\r\nHost: x\r\n${key}\r\n`)],
      ...[0x00, 0x01, 0x0b, 0x1b, 0x7f].map((c): [string, Buffer] => [`byte ${c} in X-Request-ID`, Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}X-Request-ID: a${String.fromCharCode(c)}b\r\n\r\n`, 'latin1')]),
      ['space before the colon', Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}X-Request-ID : a\r\n\r\n`)],
      ['header line without a colon', Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}nonsense\r\n\r\n`)],
      ['folded header', Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}X-A: 1\r\n 2\r\n\r\n`)],
      ['headers over 16 KB', Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}X-Pad: ${'a'.repeat(20_000)}\r\n\r\n`)],
      ['request line over 16 KB', Buffer.from(`GET /api/v1/tickets?q=${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n${key}\r\n`)],
      ['Content-Length and chunked', Buffer.from(`POST /api/v1/articles HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`)],
      ['two Content-Lengths', Buffer.from(`POST /api/v1/articles HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{} `)],
      ['negative Content-Length', Buffer.from(`POST /api/v1/articles HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nContent-Length: -1\r\n\r\n{}`)],
      ['bad chunk size', Buffer.from(`POST /api/v1/articles HTTP/1.1\r\nHost: x\r\n${key}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`)],
      ['unknown method', Buffer.from(`FROB /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}\r\n`)],
      ['lower-case method', Buffer.from(`get /api/v1/tickets HTTP/1.1\r\nHost: x\r\n${key}\r\n`)],
      ['HTTP/1.7', Buffer.from(`GET /api/v1/tickets HTTP/1.7\r\nHost: x\r\n${key}\r\n`)],
      ['bare LF line ends', Buffer.from(`GET /api/v1/tickets HTTP/1.1\nHost: x\n${key.replace('\r\n', '\n')}\n`)],
      ['no Host header', Buffer.from(`GET /api/v1/tickets HTTP/1.1\r\n${key}\r\n`)],
      ['garbage', Buffer.from('\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n', 'latin1')],
    ];
    const failures: string[] = [];
    for (const [name, bytes] of requests) {
      try {
        const answer = await rawRequest(ts.url, { parts: [bytes], waitMs: ANSWER_WITHIN_MS });
        const body = (() => {
          try {
            return JSON.parse(answer.body) as unknown;
          } catch {
            return undefined;
          }
        })();
        const status = answer.status ?? 0;
        const problems = [
          ...(status >= 400 && status < 500 ? [] : [answer.status === null ? `no answer (${answer.closedByServer ? 'closed by the server' : 'none within the deadline'})` : `status ${status}`]),
          ...(typeof answer.headers['x-request-id'] === 'string' && VALID_REQUEST_ID.test(answer.headers['x-request-id']) ? [] : ['no X-Request-ID']),
          ...(errorFormatOf(body) === null ? [`body ${JSON.stringify(answer.body.slice(0, 100))} in none of the formats`] : []),
        ];
        if (problems.length > 0) failures.push(`${name}: ${problems.join(', ')} (${answer.status} ${JSON.stringify(answer.headers)})`);
      } catch (error) {
        failures.push(`${name}: ${(error as Error).message}`);
      }
    }
    expect(failures).to.deep.equal([]);
  });

  it('refuses the cases being fixed: an empty or null webhook PATCH, a rating sent as a string', async () => {
    // A workspace of its own: the properties may have deleted, filled or blocked anything else.
    const clean = await ts.createWorkspace('business');
    const created = await clean.api('POST', '/api/v1/webhooks', { url: 'http://127.0.0.1:9/hook', description: 'patch me' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const webhook = `/api/v1/webhooks/${String(created.body.id)}`;
    const headers: [string, string][] = [['Authorization', `Bearer ${clean.apiKey}`], ['Content-Type', 'application/json']];
    const route = (key: string) => routes.find((r) => r.key === key) ?? null;
    const patch = route('PATCH /api/v1/webhooks/:webhook_id');
    const failures: string[] = [];
    for (const [name, body] of [['null', Buffer.from('null')], ['an empty body', Buffer.alloc(0)], ['no body', null]] as const) {
      const { reply } = await send(patch, 'PATCH', webhook, body === null ? headers.slice(0, 1) : headers, body);
      if (reply.status !== 422 || errorFormatOf(reply.json) !== 'validation') failures.push(`PATCH ${webhook} with ${name}: ${reply.status} ${reply.text}`);
    }
    // A ticket that takes a rating: the same request with the number 5 is accepted.
    const opened = await clean.api('POST', '/api/v1/tickets', { contact: { email: 'rate@example.com' }, subject: 'rate me' });
    const rate = `/api/v1/tickets/${String(opened.body.id)}/rate`;
    await clean.api('POST', `/api/v1/tickets/${String(opened.body.id)}/close`);
    const rateRoute = route('POST /api/v1/tickets/:id/rate');
    const asString = await send(rateRoute, 'POST', rate, headers, Buffer.from('{"rating":"5"}'));
    if (asString.reply.status !== 422 || errorFormatOf(asString.reply.json) !== 'validation') failures.push(`POST ${rate} {"rating":"5"}: ${asString.reply.status} ${asString.reply.text}`);
    const asNumber = await send(rateRoute, 'POST', rate, headers, Buffer.from('{"rating":5}'));
    expect(asNumber.reply.status, `the same ticket takes {"rating":5}: ${asNumber.reply.text}`).to.equal(200);
    expect(failures).to.deep.equal([]);
  });

  it('still answers afterwards, changed nothing in the other workspace, and left Object.prototype alone', async () => {
    const health = await fetch(`${ts.url}/healthz`, { signal: AbortSignal.timeout(ANSWER_WITHIN_MS) });
    expect(health.status).to.equal(200);
    expect(await health.json()).to.deep.equal({ status: 'ok' });
    expect((await ws.api('GET', '/api/v1/tickets')).status).to.equal(200);
    const created = await ws.api('POST', '/api/v1/tickets', { contact: { email: 'after@example.com' }, subject: 'after the run' });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    expect((await ts.admin('POST', '/admin/v1/workspaces', { name: 'after' })).status).to.equal(201);
    expect(await otherSnapshot(), 'the other workspace as its own key sees it, and its events').to.equal(otherBaseline);
    expect(Object.getOwnPropertyNames(Object.prototype).sort().join(','), 'Object.prototype').to.equal(prototypeNames);
    expect(({} as Record<string, unknown>)['polluted'], 'Object.prototype polluted').to.equal(undefined);
  });
});
