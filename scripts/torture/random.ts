// A seeded random source (mulberry32): the same --seed makes the same choices in each client, so a
// run can be repeated roughly (the interleaving of clients and the crash points stay up to timing).
export interface Random {
  /** A float in [0, 1). */
  next(): number;
  chance(p: number): boolean;
  /** An integer in [min, max]. */
  int(min: number, max: number): number;
  pick<T>(items: readonly T[]): T;
  /** A new independent source, for one client. */
  fork(): Random;
}

export const createRandom = (seed: number): Random => {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const random: Random = {
    next,
    chance: (p) => next() < p,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: <T>(items: readonly T[]): T => {
      if (items.length === 0) throw new Error('pick from nothing');
      return items[Math.floor(next() * items.length)] as T;
    },
    fork: () => createRandom(Math.floor(next() * 4294967296)),
  };
  return random;
};
