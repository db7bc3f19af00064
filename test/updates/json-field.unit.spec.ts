import { expect } from 'chai';
import fc from 'fast-check';
import { plainStringField } from '../../src/updates/json-field.js';

describe('plainStringField (unit)', () => {
  it('reads a top-level string field wherever it stands among the others', () => {
    const data = { id: 'm1', media: [{ ticket_id: 'nested' }], note: 'say "ticket_id":"x" \\', ticket_id: 't-1 é😀', n: -1.5e3, ok: true, none: null };
    expect(plainStringField(JSON.stringify(data), 'ticket_id')).to.equal('t-1 é😀');
    expect(plainStringField(JSON.stringify(data), 'id')).to.equal('m1');
  });

  it('gives null wherever it cannot tell without parsing: absent, only nested or inside a string, escaped text, another type', () => {
    expect(plainStringField(JSON.stringify({ id: 'a', inner: { ticket_id: 't' } }), 'ticket_id')).to.equal(null);
    expect(plainStringField(JSON.stringify({ note: '","ticket_id":"t' }), 'ticket_id')).to.equal(null);
    expect(plainStringField(JSON.stringify({ ticket_id: 'a"b' }), 'ticket_id')).to.equal(null);
    expect(plainStringField(JSON.stringify({ ticket_id: 'a\ud800' }), 'ticket_id')).to.equal(null);
    expect(plainStringField(JSON.stringify({ ticket_id: 7 }), 'ticket_id')).to.equal(null);
    expect(plainStringField(JSON.stringify({ ticket_idx: 't' }), 'ticket_id')).to.equal(null);
    expect(plainStringField('[]', 'id')).to.equal(null);
  });

  it('agrees with JSON.parse on any object JSON.stringify writes (property)', () => {
    const key = fc.constantFrom('id', 'ticket_id');
    const object = fc.dictionary(fc.oneof(key, fc.string()), fc.oneof(fc.string(), fc.jsonValue({ maxDepth: 2 })), { maxKeys: 5 });
    fc.assert(
      fc.property(object, key, (value, name) => {
        const text = JSON.stringify(value);
        const found = plainStringField(text, name);
        const parsed = (JSON.parse(text) as Record<string, unknown>)[name];
        if (found !== null) expect(found).to.equal(parsed);
        else expect(typeof parsed !== 'string' || JSON.stringify(parsed).slice(1, -1) !== parsed).to.equal(true);
      }),
      { numRuns: 2000 },
    );
  });
});
