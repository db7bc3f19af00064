// `npm run torture -- [--distributed] --cycles N [--seconds-per-cycle S] [--seed X] [--settle-seconds T] [--clients C]`:
// the crash torture of the embedded service (scripts/torture/main.ts). Progress lines, then what was
// found, then one JSON object as the last line; exit code 1 when anything was lost or violated.
// --distributed: the same run against the distributed mode (scripts/torture/cluster.ts), a relay, two
// API servers and two dispatchers over one SQLite folder, each cycle killing one of them, Kafka or
// Redis in rotation. It starts its own Kafka (scripts/kafka.sh on free ports: Java, and the broker jars
// Maven fetches once) and its own redis-server (installed: apt-get install redis-server), and stops them.
import { flagOption, numberOption, printFindings } from './torture/cli.js';
import { violationCount } from './torture/findings.js';
import { runTorture } from './torture/main.js';

const result = await runTorture({
  cycles: numberOption('cycles', 10),
  secondsPerCycle: numberOption('seconds-per-cycle', 4),
  seed: numberOption('seed', Math.floor(Math.random() * 2 ** 31)),
  settleSeconds: numberOption('settle-seconds', 90),
  clientsPerWorkspace: numberOption('clients', 6),
  log: (line) => console.log(line),
  distributed: flagOption('distributed'),
});

printFindings(result.findings);
const failed = violationCount(result.findings) > 0;
if (failed) console.log(`--- the service's last output\n${result.outputs}`);
console.log(JSON.stringify(result.summary));
process.exit(failed ? 1 : 0);
