// X-Request-ID (spec "Request id"): a client's id of 1..200 visible ASCII characters without spaces
// is echoed; anything else is replaced by a new server id.
import type Koa from 'koa';
import { randomId } from '../../shared/ids.js';

const VALID = /^[\x21-\x7e]{1,200}$/;

export const requestId = (): Koa.Middleware => async (ctx, next) => {
  const sent = ctx.get('X-Request-ID');
  const id = VALID.test(sent) ? sent : randomId();
  ctx.state.requestId = id;
  ctx.set('X-Request-ID', id);
  await next();
};
