// The listen command as a user runs it: `node bin/support-platform.mjs listen …` in a child process,
// its stdout (one line per event) and stderr (notices) kept line by line.
import { spawn, type ChildProcess } from 'node:child_process';

export interface ListenProcess {
  readonly child: ChildProcess;
  /** stdout lines so far. */
  readonly lines: readonly string[];
  /** stderr lines so far. */
  readonly notices: readonly string[];
  /** Resolves with the first line of stdout or stderr matching `pattern`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<string>;
  /** Sends the signal and resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  readonly exited: Promise<number | null>;
}

export const startListen = (args: readonly string[], env: Record<string, string> = {}): ListenProcess => {
  const { PATH, HOME } = process.env;
  const child = spawn(process.execPath, ['bin/support-platform.mjs', 'listen', ...args], {
    env: { PATH: PATH ?? '', HOME: HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const notices: string[] = [];
  const watchers = new Set<() => void>();
  const collect = (into: string[]) => {
    let partial = '';
    return (chunk: Buffer) => {
      const parts = (partial + chunk.toString('utf8')).split('\n');
      partial = parts.pop() ?? '';
      into.push(...parts);
      for (const watcher of [...watchers]) watcher();
    };
  };
  child.stdout?.on('data', collect(lines));
  child.stderr?.on('data', collect(notices));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    lines,
    notices,
    exited,
    waitFor: (pattern, timeoutMs = 15_000) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const found = [...lines, ...notices].find((line) => pattern.test(line));
          if (found === undefined) return;
          done();
          resolve(found);
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`listen printed nothing matching ${pattern}:\n${[...lines, ...notices].join('\n')}`));
        }, timeoutMs);
        const done = () => {
          clearTimeout(timer);
          watchers.delete(check);
        };
        watchers.add(check);
        check();
      }),
    async stop(signal = 'SIGINT') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
};
