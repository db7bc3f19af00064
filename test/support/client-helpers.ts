// The three client helpers (clients/typescript, clients/python, clients/go) as programs, for e2e
// tests that check what a running service sends with each language's own code.
import { execFile, spawn } from 'node:child_process';
import * as path from 'node:path';
import { promisify } from 'node:util';

export const CLIENTS = path.resolve(import.meta.dirname, '../../clients');
export const LANGUAGES = ['typescript', 'python', 'go'] as const;
export type Language = (typeof LANGUAGES)[number];

const run = promisify(execFile);

/** Builds the Go programs once (a `go run` per call would compile each time). */
export const buildGo = async (outDir: string, ...packages: string[]): Promise<Record<string, string>> => {
  const built: Record<string, string> = {};
  for (const pkg of packages) {
    const binary = path.join(outDir, path.basename(pkg));
    await run('go', ['build', '-o', binary, pkg], { cwd: path.join(CLIENTS, 'go') });
    built[pkg] = binary;
  }
  return built;
};

/** How to start a program of a language: the command, its arguments and the directory to run it in. */
export interface Program {
  readonly command: string;
  readonly args: readonly string[];
  readonly cwd: string;
  readonly env?: Record<string, string>;
}

/** Runs a program with `input` on stdin; resolves with its exit code and output. */
export const runProgram = (program: Program, input: string): Promise<{ code: number | null; stdout: string; stderr: string }> =>
  new Promise((resolve, reject) => {
    const child = spawn(program.command, program.args, { cwd: program.cwd, env: { ...process.env, ...program.env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });

/** Each language's verify-delivery program (the Go one from the binary buildGo made). */
export const verifyDelivery = (language: Language, goBinary: string): Program => {
  switch (language) {
    case 'typescript':
      return { command: process.execPath, args: ['--import', 'tsx', 'src/verify-delivery.ts'], cwd: path.join(CLIENTS, 'typescript') };
    case 'python':
      return { command: 'python3', args: ['-m', 'support_platform.verify_delivery'], cwd: path.join(CLIENTS, 'python') };
    case 'go':
      return { command: goBinary, args: [], cwd: path.join(CLIENTS, 'go') };
  }
};

/** A language's example program (clients/<language>/examples), as the README shows it. */
export const example = (language: Language, name: 'receive' | 'poll', goBinaries: Record<string, string>): Program => {
  switch (language) {
    case 'typescript':
      // The "source" condition resolves the package's own name to its TypeScript source.
      return { command: process.execPath, args: ['--import', 'tsx', '--conditions=source', `examples/${name}.ts`], cwd: path.join(CLIENTS, 'typescript') };
    case 'python':
      return { command: 'python3', args: [`examples/${name}.py`], cwd: path.join(CLIENTS, 'python'), env: { PYTHONPATH: path.join(CLIENTS, 'python') } };
    case 'go':
      return { command: goBinaries[`./examples/${name}`] as string, args: [], cwd: path.join(CLIENTS, 'go') };
  }
};

/** A long-running program whose output is read line by line. */
export interface Running {
  readonly lines: readonly string[];
  /** Resolves with the first line matching, waiting for it; rejects when the program exits first. */
  line(pattern: RegExp): Promise<string>;
  /** Resolves with the exit code once the program has exited. */
  readonly exited: Promise<number | null>;
  stop(): Promise<void>;
}

export const startProgram = (program: Program, env: Record<string, string>): Running => {
  const child = spawn(program.command, program.args, { cwd: program.cwd, env: { ...process.env, ...program.env, ...env } });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let partial = '';
  let ended = false;
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      ended = true;
      for (const wake of waiters) wake();
      resolve(code);
    }),
  );
  const read = (chunk: Buffer): void => {
    const text = partial + chunk.toString('utf8');
    const parts = text.split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    for (const wake of waiters) wake();
  };
  child.stdout.on('data', read);
  child.stderr.on('data', read);
  return {
    lines,
    exited,
    line: (pattern) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          const found = lines.find((l) => pattern.test(l));
          if (found !== undefined) {
            waiters.delete(check);
            resolve(found);
          } else if (ended) {
            waiters.delete(check);
            reject(new Error(`${program.command} ${program.args.join(' ')} exited without a line matching ${pattern}:\n${lines.join('\n')}`));
          }
        };
        waiters.add(check);
        check();
      }),
    async stop() {
      if (!ended) child.kill('SIGTERM');
      await exited;
    },
  };
};
