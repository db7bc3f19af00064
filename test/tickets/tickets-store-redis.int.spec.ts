import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { ProjectionReset } from '../../src/app/projection-runner.js';
import { createMemoryDocumentStore } from '../../projections/tickets-store-memory.js';
import { createRedisDocumentStore } from '../../projections/tickets-store-redis.js';
import { StoreUnavailable } from '../../projections/tickets-store.js';
import { createRedisClient, redisReady } from '../../src/shared/redis.js';
import { documentStoreContract, ref, ROWS, type Row } from './document-store.contract.js';

const redisUrl = process.env['REDIS_URL'];

// The reference adapter runs the same contract, so the contract is known to describe the port.
documentStoreContract('memory', async () => {
  const store = createMemoryDocumentStore(ROWS);
  return () => store;
});

describe('redis document store', () => {
  let client: Redis | null = null;
  const connect = async (): Promise<Redis> => {
    client ??= createRedisClient(redisUrl as string, 'command', { commandTimeoutMs: 2_000 });
    await redisReady(client);
    return client;
  };
  const prefix = () => `test:${Math.random().toString(16).slice(2)}:`;
  after(() => client?.disconnect());

  documentStoreContract(
    'redis',
    redisUrl
      ? async () => {
          const [shared, keyPrefix] = [await connect(), prefix()];
          // Each handle is a store of its own (its own cache), as in another API server.
          return () => createRedisDocumentStore(ROWS, { client: shared, keyPrefix });
        }
      : null,
  );

  (redisUrl ? it : it.skip)('asks for a rebuild from the start when its data is gone, in every process', async () => {
    const [redis, keyPrefix] = [await connect(), prefix()];
    const [one, two] = [createRedisDocumentStore(ROWS, { client: redis, keyPrefix }), createRedisDocumentStore(ROWS, { client: redis, keyPrefix })];
    const doc = (n: number): Row => ({ id: 't1', ws: 'w1', status: 'open', contact_id: null, n });
    await Promise.all([one.checkpoint(), two.checkpoint()]);
    await one.apply(ref(1), 't1', () => doc(1));
    await two.apply(ref(2), 't1', (d) => d && { ...d, n: 2 });
    // What a Redis restarted without persistence looks like: nothing of the store is left.
    const keys = await redis.keys(`{${keyPrefix}rm:${ROWS.name}:v${ROWS.version}}*`);
    expect(keys.length).to.be.greaterThan(2);
    await redis.del(...keys);

    for (const store of [one, two]) {
      let thrown: unknown = null;
      await Promise.resolve(store.apply(ref(3), 't1', (d) => d)).catch((error: unknown) => (thrown = error));
      expect(thrown).to.be.instanceOf(ProjectionReset);
    }
    // The first to read the checkpoint again starts from 0; the other resumes where it has got to.
    expect(await one.checkpoint()).to.equal(null);
    await one.apply(ref(1), 't1', () => doc(1));
    expect(await two.checkpoint()).to.deep.equal(ref(1));
    await two.apply(ref(2), 't1', (d) => d && { ...d, n: 2 });
    expect(await one.get('t1')).to.deep.equal(doc(2));
  });

  (redisUrl ? it : it.skip)('keeps each projection version apart: a new version is built beside the old one', async () => {
    const [redis, keyPrefix] = [await connect(), prefix()];
    const [v1, v2] = [createRedisDocumentStore(ROWS, { client: redis, keyPrefix }), createRedisDocumentStore({ ...ROWS, version: 2 }, { client: redis, keyPrefix })];
    await Promise.all([v1.checkpoint(), v2.checkpoint()]);
    await v1.apply(ref(1), 't1', () => ({ id: 't1', ws: 'w1', status: 'open', contact_id: null, n: 1 }));
    expect(await v2.checkpoint()).to.equal(null);
    expect(await v2.get('t1')).to.equal(undefined);
    await v2.apply(ref(1), 't1', () => ({ id: 't1', ws: 'w1', status: 'open', contact_id: null, n: 2 }));
    expect((await v1.get('t1'))?.n).to.equal(1);
    expect((await v2.get('t1'))?.n).to.equal(2);
  });

  it('reports reads that cannot reach Redis as StoreUnavailable (the API answers 503 for them)', async () => {
    const unreachable = createRedisClient('redis://127.0.0.1:1', 'command');
    try {
      const store = createRedisDocumentStore(ROWS, { client: unreachable, keyPrefix: prefix() });
      for (const read of [() => store.get('t1'), () => store.list({ partition: 'w1', newestFirst: true, page: 1, pageSize: 10 }), () => store.dump()]) {
        let thrown: unknown = null;
        await read().catch((error: unknown) => (thrown = error));
        expect(thrown).to.be.instanceOf(StoreUnavailable);
      }
    } finally {
      unreachable.disconnect();
    }
  });
});
