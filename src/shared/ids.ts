import { randomBytes } from 'node:crypto';

/** A new event or resource id: 32 lowercase hex characters (128 random bits). */
export const randomId = (): string => randomBytes(16).toString('hex');

export type IdSource = () => string;
