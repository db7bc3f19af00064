// `ADMIN_TOKEN=… npm run simulate -- --url BASE_URL --seconds N [--rate R] [--workspaces W] [--seed X]`:
// realistic mixed traffic against a running service (scripts/simulate/main.ts). Progress lines, then
// one JSON object as the last line: {"workspace_id","api_key","events","errors"}. Exit code 1 when a
// catalogue type is missing from the printed workspace's /updates or an answer was an error.
import { numberOption } from './torture/cli.js';
import { runSimulation } from './simulate/main.js';

const USAGE = `usage: ADMIN_TOKEN=<the service's ADMIN_TOKEN> npm run simulate -- --url BASE_URL --seconds N [--rate R] [--workspaces W] [--seed X]
  --url         the service, e.g. http://127.0.0.1:8080 (its /api/v1, /admin/v1 and /internal/v1)
  --seconds     how long the traffic runs (every catalogue event occurs in any run of 10 s or more)
  --rate        traffic requests per second, all workspaces together (default 20)
  --workspaces  how many workspaces it creates (default 1); the first gets every catalogue event
  --seed        repeats a run's choices
Run the service with a short billing period, e.g. BILLING_PERIOD=5s npm start, so that paid plans
expire and renew during the run. The service's plans must include team and business (the default PLANS).`;

const urlAt = process.argv.indexOf('--url');
const url = urlAt < 0 ? undefined : process.argv[urlAt + 1]?.replace(/\/+$/, '');
const seconds = numberOption('seconds', -1);
const adminToken = process.env['ADMIN_TOKEN'];
if (url === undefined || !/^https?:\/\//.test(url) || seconds <= 0 || adminToken === undefined || adminToken === '') {
  console.error(USAGE);
  process.exit(2);
}

const result = await runSimulation({
  url,
  adminToken,
  seconds,
  rate: Math.max(1, numberOption('rate', 20)),
  workspaces: Math.max(1, Math.floor(numberOption('workspaces', 1))),
  seed: numberOption('seed', Math.floor(Math.random() * 2 ** 31)),
  log: (line) => console.log(line),
}).catch((error: unknown) => {
  // The service is not there, or refuses the admin token: nothing was simulated.
  console.error(`cannot simulate: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(2);
});

console.log(`${result.requests} requests; intended refusals ${JSON.stringify(result.refused)}`);
if (result.missing.length > 0) console.log(`catalogue types missing from the /updates of workspace ${result.workspace_id}: ${result.missing.join(', ')}`);
console.log(JSON.stringify({ workspace_id: result.workspace_id, api_key: result.api_key, events: result.events, errors: result.errors }));
process.exit(result.missing.length > 0 || Object.keys(result.errors).length > 0 ? 1 : 0);
