// The traffic simulator (npm run simulate) in a short run: the real service with a short
// BILLING_PERIOD, the simulator as its own process for 10 s. Every catalogue type must be in the
// /updates of the workspace whose key it prints, and no answer may have been an error.
import { spawn } from 'node:child_process';
import { expect } from 'chai';
import { PUBLIC_EVENT_TYPES } from '../../src/domain/event-types.js';
import { readFeed } from '../../scripts/torture/feed.js';
import { ADMIN_TOKEN, startTestService, type TestService } from '../support/server.js';

const SECONDS = 10;

const simulate = (url: string): Promise<{ code: number | null; output: string }> =>
  new Promise((resolve, reject) => {
    const { PATH, HOME } = process.env;
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/simulate.ts', '--url', url, '--seconds', String(SECONDS), '--rate', '30', '--workspaces', '2'], {
      env: { PATH, HOME, ADMIN_TOKEN },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });

describe('traffic simulator (e2e: the service, and the simulator as a process)', function () {
  this.timeout(60_000);
  let ts: TestService;

  before(async () => {
    ts = await startTestService({ BILLING_PERIOD: '2s' });
  });
  after(() => ts.close());

  it('causes every catalogue event in the workspace it prints within 10 s, with no error', async () => {
    const { code, output } = await simulate(ts.url);
    const lines = output.trim().split('\n');
    const result = JSON.parse(lines.at(-1) ?? '') as { workspace_id: string; api_key: string; events: Record<string, number>; errors: Record<string, number> };
    expect(Object.keys(result).sort(), output).to.deep.equal(['api_key', 'errors', 'events', 'workspace_id']);
    expect(result.errors, output).to.deep.equal({});
    expect(PUBLIC_EVENT_TYPES.filter((type) => (result.events[type] ?? 0) < 1), output).to.deep.equal([]);
    expect(code, output).to.equal(0);
    expect(lines.filter((line) => /^\[\d+ s\] \d+ requests \(\d+\/s\), \d+ events \(\d+\/s\), errors \{/.test(line)).length, output).to.be.at.least(SECONDS - 1);

    // The counts are the printed workspace's own /updates, read with the printed key.
    const feed = await readFeed(() => ts.url, { name: 'printed', id: result.workspace_id, apiKey: result.api_key });
    const counts: Record<string, number> = {};
    for (const item of feed) counts[item.type] = (counts[item.type] ?? 0) + 1;
    for (const [type, count] of Object.entries(result.events)) expect(counts[type], type).to.be.at.least(count);
    // The billing clock went on renewing the plan (BILLING_PERIOD 2 s) after the billing tour.
    expect(feed.filter((item) => item.type === 'billing.plan_renewed' && item.data['trigger'] === 'auto').length, output).to.be.at.least(2);
  });
});
