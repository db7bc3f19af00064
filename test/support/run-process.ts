// Runs a command to its end and keeps what it wrote: for tests of command-line tools and examples.
import { spawn } from 'node:child_process';

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export const runProcess = (command: string, args: readonly string[], options: { readonly cwd?: string; readonly env: NodeJS.ProcessEnv }): Promise<Finished> =>
  new Promise((resolve) => {
    const child = spawn(command, args, options);
    let [stdout, stderr] = ['', ''];
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
