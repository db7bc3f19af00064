// The queue the Redis read models apply through (projections/redis-read-models.ts): batches in order,
// by weight, gathered for a while when the queue is short, and a failed batch failing what follows it.
import { expect } from 'chai';
import fc from 'fast-check';
import { setTimeout as sleep } from 'node:timers/promises';
import { batchedApplies } from '../../projections/redis-read-models.js';

describe('batched applies (unit)', () => {
  it('hands the items over in order, each batch weighing at most its size unless one item alone weighs more', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: 12 }), { minLength: 1, maxLength: 60 }), fc.integer({ min: 1, max: 20 }), async (weights, size) => {
        const batches: number[][] = [];
        const apply = batchedApplies<number>(size, async (batch) => void batches.push([...batch]), { weight: (i) => weights[i] as number });
        await Promise.all(weights.map((_, i) => apply(i)));
        expect(batches.flat()).to.deep.equal(weights.map((_, i) => i));
        for (const batch of batches) {
          const total = batch.reduce((sum, i) => sum + (weights[i] as number), 0);
          expect(batch.length === 1 || total <= size, `batch ${JSON.stringify(batch)} weighs ${total}`).to.equal(true);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('gathers what comes within its linger into one batch, and does not wait when the queue is full', async () => {
    const batches: number[][] = [];
    const apply = batchedApplies<number>(10, async (batch) => void batches.push([...batch]), { lingerMs: 60 });
    const first = apply(1);
    await sleep(20);
    await Promise.all([first, apply(2), apply(3)]);
    expect(batches, 'two items 20 ms apart').to.deep.equal([[1, 2, 3]]);

    // A full queue is written at once: with a linger of a minute, it would not be within the second.
    const full: number[][] = [];
    const applyFull = batchedApplies<number>(10, async (batch) => void full.push([...batch]), { lingerMs: 60_000 });
    const written = Promise.all(Array.from({ length: 10 }, (_, i) => applyFull(i))).then(() => 'written');
    expect(await Promise.race([written, sleep(1_000, 'waiting')])).to.equal('written');
    expect(full).to.deep.equal([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]);
  });

  it('without a linger, writes the first item at once and gathers the rest while it is written', async () => {
    const batches: number[][] = [];
    const apply = batchedApplies<number>(64, async (batch) => {
      batches.push([...batch]);
      await sleep(5);
    });
    await Promise.all([1, 2, 3, 4].map((i) => apply(i)));
    expect(batches).to.deep.equal([[1], [2, 3, 4]]);
  });

  it('fails a batch that failed and everything queued behind it, then applies what comes after', async () => {
    const batches: number[][] = [];
    const apply = batchedApplies<number>(2, async (batch) => {
      if (batch.includes(3)) throw new Error('Redis unavailable');
      batches.push([...batch]);
    });
    const outcomes = await Promise.allSettled([1, 2, 3, 4, 5, 6].map((i) => apply(i)));
    expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'rejected', 'rejected', 'rejected', 'rejected', 'rejected']);
    await apply(7);
    expect(batches).to.deep.equal([[1], [7]]);
  });
});
