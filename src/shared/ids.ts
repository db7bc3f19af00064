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

/**
 * A new event id: 32 lowercase hex characters, the first 12 the milliseconds since the epoch and the
 * other 20 random (80 bits). The log indexes event ids: random ones land on a random page of that
 * index each, and every page a commit touches is written to the WAL and fsynced; ids that grow with
 * time land on its last pages, which a commit's events share (measured: about 30% fewer bytes
 * written per POST /tickets). Not for resource ids, whose first characters name them (a ticket's
 * short id).
 */
export const eventId = (): string => `${Date.now().toString(16).padStart(12, '0')}${randomId().slice(0, 20)}`;

export type IdSource = () => string;
