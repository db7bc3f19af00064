// The three error body formats of the contract (spec "Errors"): the business envelope, the short
// form {detail: string}, and schema validation {detail: [problem]}. Routes throw ApiFailure values;
// one middleware (middleware/errors.ts) renders them, in the shapes of the codecs below (which the
// API document describes them with).
import * as t from 'io-ts';
import { domainError, ERROR_CODES, type DomainError, type ErrorCode } from '../domain/errors.js';
import type { JsonObject } from '../log/event-log.js';
import { statusOf } from './error-status.js';
import type { ResponseHeaders } from './response-headers.js';

export interface Problem {
  readonly type: string;
  readonly loc: readonly (string | number)[];
  readonly msg: string;
}

export type ApiError =
  | { readonly kind: 'business'; readonly status: number; readonly code: ErrorCode; readonly message: string; readonly detail: JsonObject | null }
  | { readonly kind: 'short'; readonly status: number; readonly detail: string }
  | { readonly kind: 'validation'; readonly problems: readonly Problem[] };

const ErrorCodeName = t.keyof(Object.fromEntries(ERROR_CODES.map((code) => [code, null])) as Record<ErrorCode, null>);

/** The business envelope. */
export const BusinessErrorBody = t.type({ error_code: ErrorCodeName, error_message: t.string, detail: t.union([t.UnknownRecord, t.null]), request_id: t.string });
/** The short form. */
export const ShortErrorBody = t.type({ detail: t.string });
/** The schema 422. */
export const ValidationErrorBody = t.type({ detail: t.readonlyArray(t.type({ type: t.string, loc: t.readonlyArray(t.union([t.string, t.number])), msg: t.string })) });

export class ApiFailure extends Error {
  constructor(
    readonly error: ApiError,
    readonly headers: ResponseHeaders = {},
  ) {
    super(error.kind === 'business' ? `${error.code}: ${error.message}` : JSON.stringify(error));
    this.name = 'ApiFailure';
  }
}

export const business = (error: DomainError, headers?: ResponseHeaders): ApiFailure =>
  new ApiFailure({ kind: 'business', status: statusOf(error.code), code: error.code, message: error.message, detail: error.detail }, headers);

export const short = (status: number, detail: string, headers?: ResponseHeaders): ApiFailure =>
  new ApiFailure({ kind: 'short', status, detail }, headers);

export const invalid = (problems: readonly Problem[]): ApiFailure => new ApiFailure({ kind: 'validation', problems });

export const notFound = (what: string): ApiFailure => short(404, `${what} not found`);

/** 503 while a store out of this process cannot be reached (Redis down): retry after a second, as the contract's guidance has it. */
export const unavailable = (message: string): ApiFailure => business(domainError('SERVICE_UNAVAILABLE', message), { 'Retry-After': '1' });
