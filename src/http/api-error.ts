// The three error body formats of the contract (spec "Errors"): the business envelope, the short
// form {detail: string}, and schema validation {detail: [problem]}. Routes throw ApiFailure values;
// one middleware (middleware/errors.ts) renders them.
import type { DomainError, ErrorCode } from '../domain/errors.js';
import type { JsonObject } from '../log/event-log.js';
import { statusOf } from './error-status.js';

export interface Problem {
  readonly type: string;
  readonly loc: readonly (string | number)[];
  readonly msg: string;
}

export type ApiError =
  | { readonly kind: 'business'; readonly status: number; readonly code: ErrorCode; readonly message: string; readonly detail: JsonObject | null }
  | { readonly kind: 'short'; readonly status: number; readonly detail: string }
  | { readonly kind: 'validation'; readonly problems: readonly Problem[] };

export class ApiFailure extends Error {
  constructor(
    readonly error: ApiError,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(error.kind === 'business' ? `${error.code}: ${error.message}` : JSON.stringify(error));
    this.name = 'ApiFailure';
  }
}

export const business = (error: DomainError, headers?: Record<string, string>): ApiFailure =>
  new ApiFailure({ kind: 'business', status: statusOf(error.code), code: error.code, message: error.message, detail: error.detail }, headers);

export const short = (status: number, detail: string, headers?: Record<string, string>): ApiFailure =>
  new ApiFailure({ kind: 'short', status, detail }, headers);

export const invalid = (problems: readonly Problem[]): ApiFailure => new ApiFailure({ kind: 'validation', problems });

export const notFound = (what: string): ApiFailure => short(404, `${what} not found`);
