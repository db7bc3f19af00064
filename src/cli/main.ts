// `support-platform <command>`: the npm bin (bin/support-platform.mjs) lands here.
import { UsageError } from './args.js';
import { runListen } from './listen/main.js';
import { LISTEN_USAGE } from './listen/options.js';
import { runCommand } from './run.js';

const USAGE = `Usage: support-platform <command> [options]

Commands:
  listen   forward events from /api/v1/updates to a local URL as signed webhooks

support-platform <command> --help explains a command.`;

const COMMANDS: Readonly<Record<string, { readonly run: (argv: readonly string[]) => Promise<number>; readonly usage: string }>> = {
  listen: { run: runListen, usage: LISTEN_USAGE },
};

export const main = (argv: readonly string[]): void => {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    console.log(USAGE);
    return;
  }
  const command = COMMANDS[name];
  if (command === undefined) runCommand('support-platform', () => Promise.reject(new UsageError(`unknown command "${name}"`)), USAGE);
  else runCommand(name, () => command.run(rest), command.usage);
};
