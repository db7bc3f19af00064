// Real answers and deliveries of a running server checked against the API document it serves
// (GET /api/v1/openapi.json), with ajv: the answer's status is documented, its body fits the schema,
// every header the document requires for it is there with a value its schema accepts, and every
// header it carries beyond HTTP's own framing is documented for it (so a header added without its
// description fails the suites that use this). A delivery likewise against the document's webhooks.
import { Ajv2020 } from 'ajv/dist/2020.js';
import { expect } from 'chai';
import type { ReceivedRequest } from './receiver.js';
import { call, type Reply } from './server.js';

type Schema = Record<string, unknown>;
interface HeaderDoc {
  readonly required?: boolean;
  readonly schema: Schema;
}
interface ResponseDoc {
  readonly headers?: Record<string, HeaderDoc>;
  readonly content?: Record<string, unknown>;
}
export interface ApiDocument {
  readonly paths: Record<string, Record<string, { responses: Record<string, ResponseDoc> }>>;
  readonly webhooks: Record<string, { post: { parameters: (HeaderDoc & { name: string; in: string })[] } }>;
  readonly components: { schemas: Record<string, Schema> };
}

/** Headers of the HTTP exchange itself, which no API document describes. */
const FRAMING = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'transfer-encoding']);
/** A request's own: the sender names its Host and itself. */
const CLIENT_FRAMING = new Set([...FRAMING, 'host', 'user-agent']);

const pointer = (...parts: string[]): string => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** A header value as the type its schema names (header values are text on the wire). */
const typed = (value: string, schema: Schema): unknown => (schema['type'] === 'integer' || schema['type'] === 'number' ? Number(value) : value);

export interface Conformance {
  readonly doc: ApiDocument;
  /** What breaks the document in a real answer ('' for nothing); null when the document has no answer of that status. */
  problems(method: string, path: string, reply: Pick<Reply, 'status' | 'headers' | 'body'>): string | null;
  /** Expects the real answer to be one the document describes, headers and body; gives it back. */
  conforms(method: string, path: string, reply: Reply): Reply;
  /** What breaks the document's webhook of its event in a real delivery ('' for nothing). */
  deliveryProblems(request: Pick<ReceivedRequest, 'headers' | 'body'>): string;
}

export const conformanceOf = async (url: string): Promise<Conformance> => {
  const served = await call(`${url}/api/v1/openapi.json`, 'GET', null);
  expect(served.status).to.equal(200);
  const doc = served.body as ApiDocument;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajv.addSchema({ ...doc, $id: 'api' });
  const fits = (schema: Schema, value: unknown): string => (ajv.validate(schema, value) ? '' : ajv.errorsText());

  /** The headers' problems against `documented`: required ones missing, values off schema, undocumented ones. */
  const headerProblems = (documented: readonly [string, HeaderDoc][], sent: ReadonlyMap<string, string>, framing: ReadonlySet<string>): string[] => {
    const known = new Map(documented.map(([name, h]) => [name.toLowerCase(), h]));
    const missing = [...known].filter(([name, h]) => h.required === true && !sent.has(name)).map(([name]) => `required header ${name} missing`);
    const off = [...sent].flatMap(([name, value]) => {
      const h = known.get(name);
      if (h === undefined) return framing.has(name) ? [] : [`header ${name} not documented`];
      const wrong = fits(h.schema, typed(value, h.schema));
      return wrong === '' ? [] : [`header ${name}: ${value}: ${wrong}`];
    });
    return [...missing, ...off];
  };

  const problems: Conformance['problems'] = (method, path, reply) => {
    const answer = doc.paths[path]?.[method]?.responses[String(reply.status)];
    if (answer === undefined) return null;
    const found = headerProblems(Object.entries(answer.headers ?? {}), new Map(reply.headers), FRAMING);
    if (answer.content === undefined) {
      if (reply.body !== '') found.push('a body where the document has none');
    } else if (answer.content['application/json'] !== undefined) {
      const body = fits({ $ref: `api#/${pointer('paths', path, method, 'responses', String(reply.status), 'content', 'application/json', 'schema')}` }, reply.body);
      if (body !== '') found.push(body);
    }
    return found.join('; ');
  };

  return {
    doc,
    problems,
    conforms(method, path, reply) {
      expect(problems(method, path, reply), `${method} ${path} ${reply.status} ${JSON.stringify(reply.body)}`).to.equal('');
      return reply;
    },
    deliveryProblems(request) {
      const body = JSON.parse(request.body.toString('utf8')) as { type: string };
      const webhook = doc.webhooks[body.type];
      if (webhook === undefined) return `no webhook ${body.type} in the document`;
      const sent = new Map(Object.entries(request.headers).map(([name, value]) => [name, String(value)]));
      const headers = webhook.post.parameters.filter((p) => p.in === 'header').map((p): [string, HeaderDoc] => [p.name, p]);
      const schema = { $ref: `api#/${pointer('webhooks', body.type, 'post', 'requestBody', 'content', 'application/json', 'schema')}` };
      return [...headerProblems(headers, sent, CLIENT_FRAMING), fits(schema, body)].filter((p) => p !== '').join('; ');
    },
  };
};
