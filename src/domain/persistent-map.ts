// An immutable map from strings to values whose `set` copies a path, not the map: a hash array mapped
// trie (32 children a level, 5 bits of a 32-bit hash each; keys whose hashes are equal share a
// collision node). A ticket's state keeps its messages in one: copying a plain record at every
// message.created made folding a stream quadratic (2,000 messages took 0.6 s, 5,000 took 5 s, all
// on the event loop), where this costs a few small array copies per message. Keys are plain data:
// "__proto__" and "constructor" are keys like any other.

interface Leaf<V> {
  readonly kind: 'leaf';
  readonly hash: number;
  readonly key: string;
  readonly value: V;
}

/** Keys whose whole hashes are equal. */
interface Collision<V> {
  readonly kind: 'collision';
  readonly hash: number;
  readonly leaves: readonly Leaf<V>[];
}

/** Children present for the bits set in `bitmap`, in bit order. */
interface Branch<V> {
  readonly kind: 'branch';
  readonly bitmap: number;
  readonly children: readonly Node<V>[];
}

type Node<V> = Leaf<V> | Collision<V> | Branch<V>;

export interface PersistentMap<V> {
  readonly root: Node<V> | null;
}

const BITS = 5;
const MASK = 31;

/** FNV-1a over UTF-16 units, 32 bits (exported for the tests that need keys whose hashes are equal). */
export const hashOf = (key: string): number => {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return hash >>> 0;
};

const popcount = (n: number): number => {
  n -= (n >>> 1) & 0x55555555;
  n = (n & 0x33333333) + ((n >>> 2) & 0x33333333);
  return Math.imul((n + (n >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24;
};

const slot = (hash: number, shift: number): number => (hash >>> shift) & MASK;

export const emptyMap = <V>(): PersistentMap<V> => ({ root: null });

/** Two nodes of different hashes under one new branch at `shift`, split further while their bits agree (they differ by shift 30 at the latest). */
const branchOf = <V>(a: Leaf<V> | Collision<V>, b: Leaf<V>, shift: number): Branch<V> => {
  const [sa, sb] = [slot(a.hash, shift), slot(b.hash, shift)];
  if (sa === sb) return { kind: 'branch', bitmap: 1 << sa, children: [branchOf(a, b, shift + BITS)] };
  return { kind: 'branch', bitmap: (1 << sa) | (1 << sb), children: sa < sb ? [a, b] : [b, a] };
};

/** `node` with `leaf` set in it. */
const put = <V>(node: Node<V> | null, leaf: Leaf<V>, shift: number): Node<V> => {
  if (node === null) return leaf;
  switch (node.kind) {
    case 'leaf':
      if (node.key === leaf.key) return leaf;
      if (node.hash === leaf.hash) return { kind: 'collision', hash: leaf.hash, leaves: [node, leaf] };
      return branchOf(node, leaf, shift);
    case 'collision': {
      if (node.hash !== leaf.hash) return branchOf(node, leaf, shift);
      const at = node.leaves.findIndex((l) => l.key === leaf.key);
      const leaves = at < 0 ? [...node.leaves, leaf] : node.leaves.map((l, i) => (i === at ? leaf : l));
      return { kind: 'collision', hash: node.hash, leaves };
    }
    case 'branch': {
      const bit = 1 << slot(leaf.hash, shift);
      const at = popcount(node.bitmap & (bit - 1));
      const children = node.children.slice();
      if ((node.bitmap & bit) === 0) {
        children.splice(at, 0, leaf);
        return { kind: 'branch', bitmap: node.bitmap | bit, children };
      }
      children[at] = put(node.children[at] as Node<V>, leaf, shift + BITS);
      return { kind: 'branch', bitmap: node.bitmap, children };
    }
  }
};

/** The map with `key` set to `value`; `map` itself is unchanged. */
export const setEntry = <V>(map: PersistentMap<V>, key: string, value: V): PersistentMap<V> => ({
  root: put(map.root, { kind: 'leaf', hash: hashOf(key), key, value }, 0),
});

export const getEntry = <V>(map: PersistentMap<V>, key: string): V | undefined => {
  const hash = hashOf(key);
  let node = map.root;
  for (let shift = 0; node !== null; shift += BITS) {
    if (node.kind === 'leaf') return node.key === key ? node.value : undefined;
    if (node.kind === 'collision') return node.hash === hash ? node.leaves.find((l) => l.key === key)?.value : undefined;
    const bit = 1 << slot(hash, shift);
    if ((node.bitmap & bit) === 0) return undefined;
    node = node.children[popcount(node.bitmap & (bit - 1))] as Node<V>;
  }
  return undefined;
};
