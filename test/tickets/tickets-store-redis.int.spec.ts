import type { Redis } from 'ioredis';
import { createMemoryDocumentStore } from '../../projections/tickets-store-memory.js';
import { createRedisDocumentStore } from '../../projections/tickets-store-redis.js';
import { createRedisClient, redisReady } from '../../src/shared/redis.js';
import { documentStoreContract, ROWS } from './document-store.contract.js';

const redisUrl = process.env['REDIS_URL'];

// The reference adapter runs the same contract, so the contract is known to describe the port.
documentStoreContract('memory', async () => createMemoryDocumentStore(ROWS));

describe('redis document store', () => {
  let client: Redis | null = null;
  after(() => client?.disconnect());
  documentStoreContract(
    'redis',
    redisUrl
      ? async () => {
          client ??= createRedisClient(redisUrl, 'command', { commandTimeoutMs: 2_000 });
          await redisReady(client);
          return createRedisDocumentStore(ROWS, { client, keyPrefix: `test:${Math.random().toString(16).slice(2)}:` });
        }
      : null,
  );
});
