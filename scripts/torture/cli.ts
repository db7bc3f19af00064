// What the torture's and the soak's command lines share: numeric options and the findings report.
import { VIOLATIONS, type Findings } from './findings.js';

/** `--name N` from the command line, or `fallback`; anything but a number ≥ 0 exits with status 2. */
export const numberOption = (name: string, fallback: number): number => {
  const args = process.argv.slice(2);
  const at = args.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isFinite(value) || value < 0) {
    console.error(`--${name} needs a number, got ${args[at + 1]}`);
    process.exit(2);
  }
  return value;
};

/** `--name` on the command line. */
export const flagOption = (name: string): boolean => process.argv.slice(2).includes(`--${name}`);

/** Each kind of finding with what it means and up to ten examples. */
export const printFindings = (findings: Findings): void => {
  for (const [kind, found] of Object.entries(findings)) {
    if (found.size === 0) continue;
    console.log(`${kind} (${found.size}): ${VIOLATIONS[kind as keyof typeof VIOLATIONS]}`);
    for (const detail of [...found.values()].slice(0, 10)) console.log(`  ${detail}`);
  }
};
