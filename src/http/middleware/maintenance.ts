import type Koa from 'koa';
import { business } from '../api-error.js';
import { domainError } from '../../domain/errors.js';

/** 503 MAINTENANCE_MODE on every API request while the switch is on. */
export const maintenance = (isOn: () => boolean): Koa.Middleware => async (_ctx, next) => {
  if (isOn()) throw business(domainError('MAINTENANCE_MODE', 'The platform is under maintenance; retry later'), { 'Retry-After': '60' });
  await next();
};
