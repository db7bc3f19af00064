import { expect } from 'chai';
import { eventId, randomId } from '../../src/shared/ids.js';

describe('randomId', () => {
  it('gives 32 lowercase hex characters, unique across pool refills', () => {
    const ids = Array.from({ length: 2000 }, randomId);
    for (const id of ids) expect(id).to.match(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});

describe('eventId', () => {
  it('gives 32 lowercase hex characters, the first 12 the millisecond it was minted in', () => {
    const before = Date.now();
    const id = eventId();
    const after = Date.now();
    expect(id).to.match(/^[0-9a-f]{32}$/);
    expect(parseInt(id.slice(0, 12), 16)).to.be.within(before, after);
  });

  it('sorts an id of a later millisecond after one of an earlier millisecond', () => {
    const first = eventId();
    let later = eventId();
    while (later.slice(0, 12) === first.slice(0, 12)) later = eventId();
    expect(later > first).to.equal(true);
  });

  it('keeps ids of one millisecond apart: a burst of them is all distinct', () => {
    const ids = Array.from({ length: 20_000 }, eventId);
    expect(new Set(ids.map((id) => id.slice(0, 12))).size).to.be.below(ids.length);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});
