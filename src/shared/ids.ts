import { randomFillSync } from 'node:crypto';

// One kernel call per 256 ids instead of one per id: ids are minted several times per request.
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let next = POOL_IDS;

/** A new event or resource id: 32 lowercase hex characters (128 random bits). */
export const randomId = (): string => {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  const start = 16 * next++;
  return pool.toString('hex', start, start + 16);
};

export type IdSource = () => string;
