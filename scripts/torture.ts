// `npm run torture -- [--distributed [--targets a,b]] --cycles N [--seconds-per-cycle S] [--seed X] [--settle-seconds T] [--clients C]`:
// the crash torture of the embedded service (scripts/torture/main.ts). Progress lines, then what was
// found, then one JSON object as the last line; exit code 1 when anything was lost or violated.
// --distributed: the same run against the distributed mode (scripts/torture/cluster.ts), a relay, two
// API servers and two dispatchers over one SQLite folder, each cycle killing one of them, Kafka or
// Redis in rotation. It starts its own Kafka (scripts/kafka.sh on free ports: Java, and the broker jars
// Maven fetches once) and its own redis-server (installed: apt-get install redis-server), and stops them.
// --targets a,b: the distributed run crashes only these (of api, relay, dispatcher, kafka, redis), in
// rotation, to hunt what one kind of crash shows.
import { flagOption, numberOption, printFindings } from './torture/cli.js';
import { violationCount } from './torture/findings.js';
import { runTorture } from './torture/main.js';
import { TARGETS, type Target } from './torture/cluster.js';

/** `--targets a,b` (with --distributed): each one of TARGETS, else exit status 2. */
const targetsOption = (): readonly Target[] | undefined => {
  const args = process.argv.slice(2);
  const at = args.indexOf('--targets');
  if (at < 0) return undefined;
  const targets = (args[at + 1] ?? '').split(',');
  const unknown = targets.filter((target) => !(TARGETS as readonly string[]).includes(target));
  if (unknown.length > 0 || !flagOption('distributed')) {
    console.error(`--targets goes with --distributed and takes a comma-separated list of ${TARGETS.join(', ')}; got ${args[at + 1]}`);
    process.exit(2);
  }
  return targets as Target[];
};
const targets = targetsOption();

const result = await runTorture({
  cycles: numberOption('cycles', 10),
  secondsPerCycle: numberOption('seconds-per-cycle', 4),
  seed: numberOption('seed', Math.floor(Math.random() * 2 ** 31)),
  settleSeconds: numberOption('settle-seconds', 90),
  clientsPerWorkspace: numberOption('clients', 6),
  log: (line) => console.log(line),
  distributed: flagOption('distributed'),
  ...(targets === undefined ? {} : { targets }),
});

printFindings(result.findings);
const failed = violationCount(result.findings) > 0;
if (failed) console.log(`--- the service's last output\n${result.outputs}`);
console.log(JSON.stringify(result.summary));
process.exit(failed ? 1 : 0);
