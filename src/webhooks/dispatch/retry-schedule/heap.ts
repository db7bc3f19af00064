// A binary min-heap; the schedule keeps one per subscription plus one over subscriptions.
export interface Heap<T> {
  push(item: T): void;
  peek(): T | undefined;
  pop(): T | undefined;
  readonly size: number;
}

export const createHeap = <T>(before: (a: T, b: T) => boolean): Heap<T> => {
  const items: T[] = [];
  const swap = (i: number, j: number): void => {
    const a = items[i] as T;
    items[i] = items[j] as T;
    items[j] = a;
  };
  const up = (start: number): void => {
    let i = start;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(items[i] as T, items[parent] as T)) return;
      swap(i, parent);
      i = parent;
    }
  };
  const down = (start: number): void => {
    let i = start;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < items.length && before(items[left] as T, items[least] as T)) least = left;
      if (right < items.length && before(items[right] as T, items[least] as T)) least = right;
      if (least === i) return;
      swap(i, least);
      i = least;
    }
  };
  return {
    push(item) {
      items.push(item);
      up(items.length - 1);
    },
    peek: () => items[0],
    pop() {
      const top = items[0];
      const last = items.pop();
      if (items.length > 0 && last !== undefined) {
        items[0] = last;
        down(0);
      }
      return top;
    },
    get size() {
      return items.length;
    },
  };
};
