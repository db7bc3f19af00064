// The persistent map against a plain Map, over any sequence of sets: every version answers as the
// Map did at that point (a set never changes an earlier version), for keys whose 32-bit hashes are
// equal too, and for keys a plain record would confuse with Object.prototype's members.
import { expect } from 'chai';
import fc from 'fast-check';
import { emptyMap, getEntry, hashOf, setEntry, type PersistentMap } from '../../src/domain/persistent-map.js';
import { evolveTicket, initialTicket } from '../../src/domain/ticket/state.js';

/** The first `pairs` pairs of keys `k<n>` whose hashes are equal (by the birthday bound, within a few 100,000 keys). */
const collidingKeys = (pairs: number): string[] => {
  const seen = new Map<number, string>();
  const found: string[] = [];
  for (let n = 0; found.length < 2 * pairs; n++) {
    const key = `k${n}`;
    const other = seen.get(hashOf(key));
    if (other === undefined) seen.set(hashOf(key), key);
    else found.push(other, key);
  }
  return found;
};

describe('persistent map (unit)', () => {
  const colliding = collidingKeys(3);
  const pool = [...colliding, '__proto__', 'constructor', 'toString', 'hasOwnProperty', '', 'a', 'b', ...Array.from({ length: 60 }, (_, i) => `m-${i}`)];

  it('finds keys that collide, so the collision nodes are exercised', () => {
    expect(colliding).to.have.length(6);
    for (let i = 0; i < colliding.length; i += 2) expect(hashOf(colliding[i] as string)).to.equal(hashOf(colliding[i + 1] as string));
  });

  it('answers as a Map would, in every version, whatever the sets', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.oneof(fc.constantFrom(...pool), fc.string()), fc.integer()), { maxLength: 300 }), (sets) => {
        const versions: { map: PersistentMap<number>; model: Map<string, number> }[] = [{ map: emptyMap(), model: new Map() }];
        for (const [key, value] of sets) {
          const last = versions.at(-1) as (typeof versions)[number];
          versions.push({ map: setEntry(last.map, key, value), model: new Map(last.model).set(key, value) });
        }
        const keys = [...pool, ...sets.map(([key]) => key)];
        for (const { map, model } of versions) {
          for (const key of keys) expect(getEntry(map, key)).to.equal(model.get(key));
        }
      }),
      { numRuns: 200 },
    );
  });

  it("keeps a ticket's messages by id: an inherited name is not a message", () => {
    const opened = evolveTicket(initialTicket, { type: 'ticket.opened', data: { workspace_id: 'w', contact_id: 'c', created_us: 1, status: 'new', subject: null, priority: 'normal' } });
    const posted = evolveTicket(opened, { type: 'message.created', data: { message_id: 'm1', sender_type: 'contact', sender_id: 'c', is_internal: false, content: 'hi', media: [] } });
    expect(getEntry(posted.messages, 'm1')?.content).to.equal('hi');
    expect(getEntry(posted.messages, 'constructor')).to.equal(undefined);
    expect(getEntry(opened.messages, 'm1')).to.equal(undefined);
  });
});
