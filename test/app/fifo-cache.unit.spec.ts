// The bounded in-process cache: the entry added first goes when full, and clear() starts it over.
import { expect } from 'chai';
import { createFifoCache } from '../../src/app/fifo-cache.js';

describe('fifo cache (unit)', () => {
  it('evicts the entry added first once full; setting a kept key again does not count as adding', () => {
    const cache = createFifoCache<number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 3);
    cache.set('c', 4);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).to.deep.equal([undefined, 2, 4]);
  });

  it('forgets everything on clear, and after it holds its capacity again without evicting what came since', () => {
    const cache = createFifoCache<number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.clear();
    expect([cache.get('a'), cache.get('b')]).to.deep.equal([undefined, undefined]);
    // 'b' again: the slots of the entries cleared must not evict it.
    cache.set('b', 3);
    cache.set('c', 4);
    expect([cache.get('b'), cache.get('c')]).to.deep.equal([3, 4]);
    cache.set('d', 5);
    expect([cache.get('b'), cache.get('c'), cache.get('d')]).to.deep.equal([undefined, 4, 5]);
  });
});
