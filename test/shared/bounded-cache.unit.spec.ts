// The bounded in-process cache: when full, a new key takes the place of an entry not used since the
// clock hand last passed it, so entries in use stay; clear() starts it over. Against a Map model, any
// sequence of operations keeps it within its capacity and never answers a value that is not the last set.
import { expect } from 'chai';
import fc from 'fast-check';
import { createBoundedCache } from '../../src/shared/bounded-cache.js';

describe('bounded cache (unit)', () => {
  it('keeps the entries read since the hand last passed and evicts one that was not', () => {
    const cache = createBoundedCache<number>(3);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('c', 3);
    cache.get('a');
    // The hand clears a's mark and takes b's slot.
    cache.set('d', 4);
    expect([cache.get('a'), cache.get('b'), cache.get('c'), cache.get('d')]).to.deep.equal([1, undefined, 3, 4]);
    // Every entry was just read: a full turn clears the marks, and the hand takes the slot it started at (c's).
    cache.set('e', 5);
    expect([cache.get('a'), cache.get('c'), cache.get('d'), cache.get('e')]).to.deep.equal([1, undefined, 4, 5]);
  });

  it('counts setting a kept key again as a use, not as adding one', () => {
    const cache = createBoundedCache<number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.set('a', 3);
    cache.set('c', 4);
    expect([cache.get('a'), cache.get('b'), cache.get('c')]).to.deep.equal([3, undefined, 4]);
  });

  it('keeps a key in use while ten times its capacity of keys pass through once each', () => {
    const cache = createBoundedCache<number>(100);
    cache.set('busy', 0);
    for (let i = 0; i < 1_000; i++) {
      cache.set(`once-${i}`, i);
      expect(cache.get('busy'), `after ${i + 1} others`).to.equal(0);
    }
  });

  it('forgets everything on clear, and after it holds its capacity again without evicting what came since', () => {
    const cache = createBoundedCache<number>(2);
    cache.set('a', 1);
    cache.set('b', 2);
    cache.clear();
    expect([cache.get('a'), cache.get('b')]).to.deep.equal([undefined, undefined]);
    // 'b' again: the slots of the entries cleared must not evict it.
    cache.set('b', 3);
    cache.set('c', 4);
    expect([cache.get('b'), cache.get('c')]).to.deep.equal([3, 4]);
  });

  it('stays within its capacity and answers only the last value set, whatever the operations', () => {
    const op = fc.oneof(
      fc.tuple(fc.constant('set' as const), fc.integer({ min: 0, max: 12 }), fc.integer()),
      fc.tuple(fc.constant('get' as const), fc.integer({ min: 0, max: 12 }), fc.constant(0)),
      fc.tuple(fc.constant('delete' as const), fc.integer({ min: 0, max: 12 }), fc.constant(0)),
      fc.tuple(fc.constant('clear' as const), fc.constant(0), fc.constant(0)),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 200 }), (capacity, ops) => {
        const cache = createBoundedCache<number>(capacity);
        const last = new Map<string, number>();
        for (const [kind, k, value] of ops) {
          const key = `k${k}`;
          if (kind === 'set') {
            cache.set(key, value);
            last.set(key, value);
          } else if (kind === 'get') {
            const got = cache.get(key);
            if (got !== undefined) expect(got).to.equal(last.get(key));
          } else if (kind === 'delete') {
            cache.delete(key);
            last.delete(key);
            expect(cache.get(key)).to.equal(undefined);
          } else {
            cache.clear();
            last.clear();
          }
          // What the cache holds, counted by reading every key (which marks them: the properties hold whatever is read).
          const held = [...last.keys()].filter((kk) => cache.get(kk) !== undefined).length;
          expect(held).to.be.at.most(capacity);
        }
        // The last key set is always held.
        const lastSet = [...ops].reverse().find(([kind]) => kind !== 'get');
        if (lastSet?.[0] === 'set') expect(cache.get(`k${lastSet[1]}`)).to.equal(lastSet[2]);
      }),
      { numRuns: 300 },
    );
  });
});
