// The deliveries a dispatcher keeps from its own puts (src/webhooks/dispatch/own-puts.ts): bounded,
// the oldest going first, each taken once.
import { expect } from 'chai';
import { createOwnPuts } from '../../src/webhooks/dispatch/own-puts.js';

describe('own puts kept for their claim', () => {
  it('gives each kept delivery once, as last kept', () => {
    const puts = createOwnPuts<string>(10);
    puts.keep('a', 'round 1');
    puts.keep('a', 'round 2');
    expect(puts.take('a')).to.equal('round 2');
    expect(puts.take('a')).to.equal(undefined);
    expect(puts.take('never')).to.equal(undefined);
  });

  it('drops the oldest once past its bound, whatever was taken meanwhile', () => {
    const puts = createOwnPuts<number>(100);
    for (let i = 0; i < 100; i++) puts.keep(`d${i}`, i);
    // Claims take some back (slots freed in the middle), then new puts arrive past the bound.
    for (let i = 0; i < 100; i += 3) expect(puts.take(`d${i}`)).to.equal(i);
    for (let i = 100; i < 250; i++) puts.keep(`d${i}`, i);
    const kept = Array.from({ length: 250 }, (_, i) => i).filter((i) => puts.take(`d${i}`) !== undefined);
    expect(kept).to.have.length(100);
    // The 100 newest puts stay; of the first hundred, none.
    expect(kept).to.deep.equal(Array.from({ length: 100 }, (_, i) => 150 + i));
  });
});
