// What a route module tells the API document about its public routes: the codecs its handlers decode
// with and answer in. The document (src/openapi) adds what every keyed route shares (the key, the
// rate limit, the 422 of a body or query that fails its codec, 500/503, and the headers those carry),
// so a route lists only its own answers, and the headers of src/http/response-headers.ts they carry.
import type * as t from 'io-ts';
import type { ResponseHeader } from './response-headers.js';

export type ErrorFormat = 'business' | 'short' | 'validation';

/** Which headers of the table an answer carries: on every such answer, or on some. */
export type AnswerHeaders = Readonly<Partial<Record<ResponseHeader, 'always' | 'sometimes'>>>;

export type Answer = { readonly status: number; readonly description: string; readonly headers?: AnswerHeaders } & (
  | { readonly body?: t.Any; readonly media?: 'binary' }
  | { readonly error: ErrorFormat }
);

export interface Operation {
  readonly method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** As registered on the /api/v1 router, e.g. `/tickets/:id` (parameters are strings unless `params` says). */
  readonly path: string;
  readonly summary: string;
  readonly params?: t.Any;
  readonly query?: t.Any;
  /** A JSON body's codec, or a multipart upload of one `file` part. */
  readonly body?: t.Any | 'multipart-file';
  readonly answers: readonly Answer[];
  /** Answered without an API key. */
  readonly keyless?: true;
}

export const answer = (status: number, description: string, body?: t.Any, headers?: AnswerHeaders): Answer => ({
  status,
  description,
  ...(body === undefined ? {} : { body }),
  ...(headers === undefined ? {} : { headers }),
});

/** Headers on every such answer. */
export const always = (...names: readonly ResponseHeader[]): AnswerHeaders => Object.fromEntries(names.map((name) => [name, 'always']));

export const refusal = (status: number, error: ErrorFormat, description: string, headers?: AnswerHeaders): Answer => ({
  status,
  error,
  description,
  ...(headers === undefined ? {} : { headers }),
});
