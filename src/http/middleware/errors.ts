// The one place that renders errors in the contract's three body formats. Bugs become a 500 in the
// business envelope; their stack goes to the log, never to the client.
import type Koa from 'koa';
import { StreamContended } from '../../app/command-handler.js';
import type { RequestScope } from '../../app/request-scope.js';
import type * as t from 'io-ts';
import { ApiFailure, type ApiError, type BusinessErrorBody, type ShortErrorBody, type ValidationErrorBody } from '../api-error.js';
import { setHeaders } from '../response-headers.js';

type ErrorBody = t.TypeOf<typeof BusinessErrorBody> | t.TypeOf<typeof ShortErrorBody> | t.TypeOf<typeof ValidationErrorBody>;

const bodyOf = (error: ApiError, requestId: string): { status: number; body: ErrorBody } => {
  switch (error.kind) {
    case 'business':
      return { status: error.status, body: { error_code: error.code, error_message: error.message, detail: error.detail, request_id: requestId } };
    case 'short':
      return { status: error.status, body: { detail: error.detail } };
    case 'validation':
      return { status: 422, body: { detail: error.problems } };
  }
};

/** Failures raised by raw-body, formidable and koa itself (oversize bodies, bad lengths, aborted requests). */
const fromHttpError = (error: { status?: unknown; type?: unknown; message?: unknown; expose?: unknown }): ApiError | null => {
  const status = typeof error.status === 'number' ? error.status : 0;
  if (status < 400 || status >= 500) return null;
  if (status === 413) return { kind: 'short', status, detail: 'Request body too large' };
  if (status === 415) return { kind: 'short', status, detail: 'Unsupported content type or encoding' };
  return { kind: 'short', status, detail: error.expose === true ? String(error.message) : 'Bad request' };
};

/**
 * raw-body's error for a request whose stream is gone before its body was read: its client closed it
 * while the request waited (a Redis round trip; a write held for webhook delivery ends itself when its
 * client leaves, write-hold.ts). Nothing was done and no one reads the answer: not a failure of the server.
 */
const closedByClient = (ctx: Koa.Context, caught: unknown): ApiError | null =>
  ctx.req.destroyed && (caught as { type?: unknown } | null)?.type === 'stream.not.readable'
    ? { kind: 'short', status: 400, detail: 'The client closed the request before its body was read' }
    : null;

/** Another process kept winning a stream's races: nothing was written, the client retries shortly. */
const contended = new ApiFailure(
  { kind: 'business', status: 503, code: 'SERVICE_UNAVAILABLE', message: 'This record is being changed elsewhere right now: retry shortly', detail: null },
  { 'Retry-After': '1' },
);

/** Renders anything a request threw as the answer, in one of the three body formats. */
export const renderFailure = (ctx: Koa.Context, caught: unknown): void => {
  const failure = caught instanceof ApiFailure ? caught : caught instanceof StreamContended ? contended : null;
  const apiError = failure?.error ?? fromHttpError(caught as Record<string, unknown>) ?? closedByClient(ctx, caught);
  if (apiError === null) {
    console.error(`request ${String(ctx.state.requestId)} ${ctx.method} ${ctx.path} failed:`, caught);
  }
  const { status, body } = bodyOf(
    apiError ?? { kind: 'business', status: 500, code: 'INTERNAL_ERROR', message: 'Internal server error', detail: null },
    String(ctx.state.requestId),
  );
  ctx.status = status;
  ctx.body = body;
  setHeaders(ctx, failure?.headers ?? {});
};

/** What a failure that would be a 503 becomes once the request has written something. */
const writtenThenFailed = new ApiFailure({
  kind: 'business',
  status: 500,
  code: 'INTERNAL_ERROR',
  message: 'The request was carried out in part or in whole, then failed: read the resources it concerns to see what was done',
  detail: null,
});

export const errors = (): Koa.Middleware => async (ctx, next) => {
  // The request's scope, which its commands mark when they append (app/request-scope.ts).
  const scope: RequestScope = { wrote: false };
  ctx.state.scope = scope;
  try {
    await next();
  } catch (caught) {
    renderFailure(ctx, caught);
    // A 503 tells the client nothing was written (its store went away after the write, or a later
    // append lost its races). A keyed request is answered inside the idempotency middleware, where
    // the 503 stands: its retry under the same key resumes it.
    if (ctx.status === 503 && scope.wrote) {
      ctx.remove('Retry-After');
      renderFailure(ctx, writtenThenFailed);
    }
  }
};
