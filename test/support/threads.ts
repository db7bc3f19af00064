// A process's threads as the kernel has them (Linux): what `ps -L` and `top -H` show.
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';

export interface Thread {
  readonly tid: number;
  readonly name: string;
  readonly nice: number;
}

/** The threads of process `pid`, each with its name and nice value (`stat`'s 19th field). */
export const threadsOf = (pid: number): Thread[] =>
  readdirSync(`/proc/${pid}/task`).flatMap((entry) => {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return [{ tid: Number(entry), name: readFileSync(`/proc/${pid}/task/${entry}/comm`, 'utf8').trim(), nice: Number(fields[16]) }];
    } catch {
      return []; // a thread that ended meanwhile
    }
  });

/** The nice values of the threads named `name`: a thread starts with its creator's name and nice value, so those it started share them. */
export const nicesOf = (threads: readonly Thread[], name: string): number[] => {
  const found = threads.filter((t) => t.name === name);
  expect(found, `a thread named ${name} in ${JSON.stringify(threads)}`).to.not.be.empty;
  return [...new Set(found.map((t) => t.nice))];
};
