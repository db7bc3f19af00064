// The heads an SQLite log connection keeps in memory (src/log/sqlite-heads.ts) must always answer
// what the file would: what the open batch staged, else what is committed, whichever connection
// committed it, however few keys it may keep.
import { expect } from 'chai';
import fc from 'fast-check';
import { knownHeads } from '../../src/log/sqlite-heads.js';

/** The file as a model: committed values and the data version other connections' commits change. */
const fileModel = () => {
  const committed = new Map<string, number>();
  let version = 0;
  let reads = 0;
  return {
    committed,
    read: (key: string): number => ((reads += 1), committed.get(key) ?? -1),
    otherCommits: (key: string, value: number) => {
      committed.set(key, value);
      version += 1;
    },
    get version() {
      return version;
    },
    get reads() {
      return reads;
    },
  };
};

describe('SQLite log heads kept in memory (unit)', () => {
  it('reads a key from the file once, then answers from memory while no other connection commits', () => {
    const file = fileModel();
    file.committed.set('a', 3);
    const heads = knownHeads(file.read, 10);
    heads.check(file.version);
    expect([heads.get('a'), heads.get('a'), heads.get('b')]).to.deep.equal([3, 3, -1]);
    heads.stage('a', 4);
    heads.commit();
    heads.check(file.version);
    expect(heads.get('a')).to.equal(4);
    expect(file.reads).to.equal(2);
  });

  it("reads again after another connection's commit, after a rollback and past its limit", () => {
    const file = fileModel();
    const heads = knownHeads(file.read, 2);
    heads.check(file.version);
    heads.stage('a', 1);
    heads.rollback();
    expect(heads.get('a'), 'a rolled-back stage is gone').to.equal(-1);
    file.otherCommits('a', 7);
    heads.check(file.version);
    expect(heads.get('a'), "another connection's commit").to.equal(7);
    heads.get('b');
    heads.get('c');
    const before = file.reads;
    expect(heads.get('a'), 'the oldest key was dropped past the limit').to.equal(7);
    expect(file.reads).to.equal(before + 1);
  });

  it('answers as the file would through any sequence of batches, rollbacks and other writers (property)', () => {
    const key = fc.constantFrom('a', 'b', 'c', 'd');
    const op = fc.oneof(
      fc.record({ kind: fc.constant('get' as const), key }),
      fc.record({ kind: fc.constant('stage' as const), key, value: fc.nat(100) }),
      fc.record({ kind: fc.constant('end' as const), commit: fc.boolean() }),
      fc.record({ kind: fc.constant('other' as const), key, value: fc.nat(100) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.integer({ min: 1, max: 4 }), (ops, limit) => {
        const file = fileModel();
        const heads = knownHeads(file.read, limit);
        // A batch is open from its check to its end; other connections commit only between batches.
        let staged = new Map<string, number>();
        let open = false;
        const begin = () => {
          if (!open) heads.check(file.version);
          open = true;
        };
        for (const o of ops) {
          if (o.kind === 'get') {
            begin();
            expect(heads.get(o.key)).to.equal(staged.get(o.key) ?? file.committed.get(o.key) ?? -1);
          } else if (o.kind === 'stage') {
            begin();
            heads.stage(o.key, o.value);
            staged.set(o.key, o.value);
          } else if (o.kind === 'end' && open) {
            if (o.commit) staged.forEach((value, k) => file.committed.set(k, value));
            if (o.commit) heads.commit();
            else heads.rollback();
            staged = new Map();
            open = false;
          } else if (o.kind === 'other' && !open) {
            file.otherCommits(o.key, o.value);
          }
        }
      }),
      { numRuns: 500 },
    );
  });
});
