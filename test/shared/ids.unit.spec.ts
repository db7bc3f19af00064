import { expect } from 'chai';
import { randomId } from '../../src/shared/ids.js';

describe('randomId', () => {
  it('gives 32 lowercase hex characters, unique across pool refills', () => {
    const ids = Array.from({ length: 2000 }, randomId);
    for (const id of ids) expect(id).to.match(/^[0-9a-f]{32}$/);
    expect(new Set(ids).size).to.equal(ids.length);
  });
});
