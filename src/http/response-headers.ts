// Every response header the API sets beyond HTTP's own framing (Content-Type, Content-Length, Date,
// Connection): its schema and meaning, once. The code names a header from this table when it sets
// one (setHeaders, ApiFailure's headers), and the API document describes each answer's headers from
// it (an answer declares which it carries, src/http/operations.ts), so no header goes out under a
// name the document cannot describe. The contract has no rate-limit headers: 429 has Retry-After only.
import type Koa from 'koa';

export interface HeaderDefinition {
  readonly description: string;
  readonly schema: { readonly [key: string]: unknown };
}

export const RESPONSE_HEADERS = {
  'X-Request-ID': {
    description: "The request's id: the client's own X-Request-ID when it is 1 to 200 visible ASCII characters, else a new one; request_id in a business error",
    schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,200}$' },
  },
  'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer', minimum: 0 } },
  'WWW-Authenticate': { description: 'The API key goes in Authorization: Bearer <key>', schema: { const: 'Bearer' } },
  'Idempotent-Replayed': {
    description: 'This is the recorded answer to an earlier request with the same Idempotency-Key, not a new run',
    schema: { const: 'true' },
  },
  Allow: { description: 'The methods the path has (405)', schema: { type: 'string' } },
  Location: { description: 'Where the answer is', schema: { type: 'string' } },
  'Cache-Control': { description: 'No shared cache may keep the answer', schema: { type: 'string' } },
  'Content-Disposition': { description: 'inline for images, audio, video and plain text, else attachment; with the file name', schema: { type: 'string' } },
  'X-Content-Type-Options': { description: 'Served as its declared type, never sniffed', schema: { const: 'nosniff' } },
  'Content-Security-Policy': { description: 'Rendered anyway: no script, no request, an opaque origin', schema: { type: 'string' } },
} as const satisfies Readonly<Record<string, HeaderDefinition>>;

export type ResponseHeader = keyof typeof RESPONSE_HEADERS;

/** Headers to send, by their names in the table. */
export type ResponseHeaders = Readonly<Partial<Record<ResponseHeader, string>>>;

export const setHeaders = (ctx: Koa.Context, headers: ResponseHeaders): void => {
  for (const [name, value] of Object.entries(headers)) ctx.set(name, value);
};
