// Entry point of `support-platform listen` and `npm run listen`: options, the signing secret, and a
// clean stop on Ctrl-C (SIGINT) or SIGTERM; a second signal exits at once.
import { newWebhookSecret } from '../../webhooks/secrets.js';
import { isMain, runCommand } from '../run.js';
import { listen } from './listen.js';
import { LISTEN_USAGE, parseListenOptions } from './options.js';

export const runListen = async (argv: readonly string[]): Promise<number> => {
  const options = parseListenOptions(argv, process.env);
  if (options === null) {
    console.log(LISTEN_USAGE);
    return 0;
  }
  const secret = options.secret ?? newWebhookSecret();
  const stop = new AbortController();
  const onSignal = (signal: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(130);
    console.error(`${signal}: finishing the event in flight (again to quit at once)`);
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  console.log(`Ready! Your webhook signing secret is ${secret}`);
  try {
    await listen(options, secret, { line: (text) => console.log(text), notice: (text) => console.error(text) }, stop.signal);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  return 0;
};

if (isMain(import.meta.url)) runCommand('listen', () => runListen(process.argv.slice(2)), LISTEN_USAGE);
