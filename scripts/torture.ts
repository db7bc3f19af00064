// `npm run torture -- --cycles N [--seconds-per-cycle S] [--seed X] [--settle-seconds T] [--clients C]`:
// the crash torture of the embedded service (scripts/torture/main.ts). Progress lines, then what was
// found, then one JSON object as the last line; exit code 1 when anything was lost or violated.
import { VIOLATIONS, violationCount } from './torture/findings.js';
import { runTorture } from './torture/main.js';

const args = process.argv.slice(2);
const option = (name: string, fallback: number): number => {
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`--${name} needs a number, got ${args[at + 1]}`);
    process.exit(2);
  }
  return value;
};

const result = await runTorture({
  cycles: option('cycles', 10),
  secondsPerCycle: option('seconds-per-cycle', 4),
  seed: option('seed', Math.floor(Math.random() * 2 ** 31)),
  settleSeconds: option('settle-seconds', 90),
  clientsPerWorkspace: option('clients', 6),
  log: (line) => console.log(line),
});

for (const [kind, found] of Object.entries(result.findings)) {
  if (found.size === 0) continue;
  console.log(`${kind} (${found.size}): ${VIOLATIONS[kind as keyof typeof VIOLATIONS]}`);
  for (const detail of [...found.values()].slice(0, 10)) console.log(`  ${detail}`);
}
const failed = violationCount(result.findings) > 0;
if (failed) console.log(`--- the service's last output\n${result.outputs}`);
console.log(JSON.stringify(result.summary));
process.exit(failed ? 1 : 0);
