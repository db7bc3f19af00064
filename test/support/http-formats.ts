// The contract's three error body formats (spec "Errors"), as predicates for HTTP tests.
import { expect } from 'chai';
import type { Reply } from './server.js';

export type ErrorFormat = 'business' | 'short' | 'validation';

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Which of the three formats `body` is in, or null when it is none of them exactly. */
export const errorFormatOf = (body: unknown): ErrorFormat | null => {
  if (!isObject(body)) return null;
  const keys = Object.keys(body).sort().join(',');
  if (
    keys === 'detail,error_code,error_message,request_id' &&
    typeof body['error_code'] === 'string' &&
    /^[A-Z][A-Z0-9_]*$/.test(body['error_code']) &&
    typeof body['error_message'] === 'string' &&
    typeof body['request_id'] === 'string' &&
    (body['detail'] === null || isObject(body['detail']))
  ) {
    return 'business';
  }
  if (keys !== 'detail') return null;
  const detail = body['detail'];
  if (typeof detail === 'string') return 'short';
  const problem = (p: unknown) =>
    isObject(p) && typeof p['type'] === 'string' && typeof p['msg'] === 'string' && Array.isArray(p['loc']) && p['loc'].every((l) => typeof l === 'string' || typeof l === 'number');
  return Array.isArray(detail) && detail.length > 0 && detail.every(problem) ? 'validation' : null;
};

/** Asserts `reply` is an error in `format`; a business envelope's request_id must equal X-Request-ID. */
export const expectError = (reply: Reply, status: number, format: ErrorFormat, code?: string) => {
  expect(reply.status, JSON.stringify(reply.body)).to.equal(status);
  expect(errorFormatOf(reply.body), JSON.stringify(reply.body)).to.equal(format);
  if (format === 'business') {
    expect(reply.body.request_id).to.equal(reply.headers.get('x-request-id'));
    if (code !== undefined) expect(reply.body.error_code).to.equal(code);
  }
};
