// X-Request-ID (spec "Request id"): a client's id of 1..200 visible ASCII characters without spaces
// is echoed; anything else is replaced by a new server id.
import type Koa from 'koa';
import { randomId } from '../../shared/ids.js';
import { RESPONSE_HEADERS, setHeaders } from '../response-headers.js';

const VALID = new RegExp(RESPONSE_HEADERS['X-Request-ID'].schema.pattern);

export const requestId = (): Koa.Middleware => async (ctx, next) => {
  const sent = ctx.get('X-Request-ID');
  const id = VALID.test(sent) ? sent : randomId();
  ctx.state.requestId = id;
  setHeaders(ctx, { 'X-Request-ID': id });
  await next();
};
