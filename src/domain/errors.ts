// Business errors are values with a stable error_code (spec "Errors"). The HTTP layer maps each code
// to its status in one exhaustive table (src/http/error-status.ts), so an unmapped code fails to compile.
import type { JsonObject } from '../log/event-log.js';

export const ERROR_CODES = [
  'TICKET_NOT_FOUND',
  'TICKET_ALREADY_CLOSED',
  'TICKET_INVALID_STATUS_TRANSITION',
  'TICKET_LIMIT_REACHED',
  'CONTACT_BLOCKED',
  'CONTACT_NOT_FOUND',
  'MESSAGE_NOT_FOUND',
  'MESSAGE_EMPTY',
  'ARTICLE_NOT_FOUND',
  'PLAN_FEATURE_UNAVAILABLE',
  'VALIDATION_ERROR',
  'RATE_LIMIT_EXCEEDED',
  'MEDIA_TOO_LARGE',
  'MEDIA_UPLOAD_FAILED',
  'MAINTENANCE_MODE',
  'SERVICE_UNAVAILABLE',
  'INTERNAL_ERROR',
  'WORKSPACE_NOT_FOUND',
  'OPERATOR_NOT_FOUND',
  'WEBHOOK_NOT_FOUND',
  'WEBHOOK_LIMIT_REACHED',
  'CONFLICT',
  'IDEMPOTENCY_KEY_REUSED',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

export interface DomainError {
  readonly code: ErrorCode;
  readonly message: string;
  readonly detail: JsonObject | null;
}

export const domainError = (code: ErrorCode, message: string, detail: JsonObject | null = null): DomainError => ({
  code,
  message,
  detail,
});
