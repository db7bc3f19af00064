// `npm run bench -- NAME [--long]`: runs one benchmark; its last output line is one JSON object.
const NAMES = ['log', 'api', 'updates', 'webhooks', 'kafka', 'kafka-restart', 'startup', 'read-models', 'contention', 'sustained', 'deliveries-history', 'replay', 'replay-history', 'retry-take', 'index-writers', 'ticket-fold', 'index-growth', 'outage', 'takeover', 'deactivation', 'replay-backlog', 'deletion', 'dispatcher-restart', 'stream-delete', 'history-forget', 'history-forget-redis'] as const;
type Name = (typeof NAMES)[number];

interface Bench {
  run(options: { long: boolean }): Promise<Record<string, number | string>>;
}

const args = process.argv.slice(2);
const name = args.find((a) => !a.startsWith('--')) as Name | undefined;
if (name === undefined || !NAMES.includes(name)) {
  console.error(`usage: npm run bench -- <${NAMES.join('|')}> [--long]`);
  process.exit(2);
}
const bench = (await import(`./bench/${name}.ts`)) as Bench;
const figures = await bench.run({ long: args.includes('--long') });
console.log(JSON.stringify(figures));
process.exit(0);
