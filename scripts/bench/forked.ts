// A benchmark's helper process (a receiver, as an endpoint is another machine): this same module
// forked with a role variable set, talking over the IPC channel. `next(key)` resolves with the next
// message that carries `key`; `close()` disconnects, and the child exits.
import { fork, type ChildProcess } from 'node:child_process';

export interface Forked<M extends object> {
  readonly child: ChildProcess;
  next<K extends string>(key: K): Promise<Extract<M, Record<K, unknown>>>;
  close(): Promise<void>;
}

export const forkRole = <M extends object>(file: string, role: string, value: string): Forked<M> => {
  const child = fork(file, [], { execArgv: ['--import', 'tsx'], env: { ...process.env, [role]: value } });
  return {
    child,
    next: <K extends string>(key: K) =>
      new Promise<Extract<M, Record<K, unknown>>>((resolve) => {
        const listener = (message: M) => {
          if (!(key in message)) return;
          child.off('message', listener);
          resolve(message as Extract<M, Record<K, unknown>>);
        };
        child.on('message', listener);
      }),
    close: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.disconnect();
      }),
  };
};
