// scripts/export.ts and scripts/rebuild.ts as a user runs them: --help, a clear refusal of a mistyped
// workspace or command line (non-zero exit), and the export of a real stopped service's log.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { runProcess } from '../support/run-process.js';
import { startTestService, type TestService, type TestWorkspace } from '../support/server.js';

const run = (script: string, args: readonly string[]) => runProcess(process.execPath, ['--import', 'tsx', script, ...args], { env: { PATH: process.env['PATH'] ?? '' } });

describe('export and rebuild scripts (e2e)', function () {
  this.timeout(30_000);
  let svc: TestService;
  let ws: TestWorkspace;
  let dataDir: string;

  before(async () => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-scripts-'));
    svc = await startTestService({}, { dataDir });
    ws = await svc.createWorkspace();
    await svc.createWorkspace();
    expect((await ws.api('POST', '/api/v1/tickets', { contact: { email: 'a@example.test' }, message: 'hello' })).status).to.equal(201);
    await svc.service.close(); // the scripts read a stopped service's log
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  for (const script of ['scripts/export.ts', 'scripts/rebuild.ts']) {
    it(`${script} --help prints its usage and exits 0`, async () => {
      const result = await run(script, ['--help']);
      expect(result.code).to.equal(0);
      expect(result.stdout).to.match(/^Usage: npx tsx scripts\//).and.include('--data-dir DIR');
    });

    it(`${script} refuses an unknown option with exit code 2 and its usage`, async () => {
      const result = await run(script, ['--data-dri', dataDir]);
      expect(result.code).to.equal(2);
      expect(result.stderr).to.include("Unknown option '--data-dri'").and.include('Usage: npx tsx scripts/');
    });
  }

  it('exports a known workspace, line by line as /updates serves it', async () => {
    const result = await run('scripts/export.ts', ['--data-dir', dataDir, '--workspace', ws.workspaceId]);
    expect(result.code).to.equal(0);
    const lines = result.stdout.trim().split('\n').map((line) => JSON.parse(line) as { type: string; workspace_id: string });
    expect(lines.map((l) => l.type)).to.include('ticket.created');
    expect(new Set(lines.map((l) => l.workspace_id))).to.deep.equal(new Set([ws.workspaceId]));
    expect(result.stderr).to.match(new RegExp(`exported ${lines.length} events in`));
  });

  it('refuses an unknown workspace with exit code 1, naming it, instead of exporting 0 events', async () => {
    const result = await run('scripts/export.ts', ['--data-dir', dataDir, '--workspace', 'nope']);
    expect(result.code).to.equal(1);
    expect(result.stdout).to.equal('');
    expect(result.stderr.trim()).to.equal(`export failed: no workspace nope in ${path.join(dataDir, 'events.sqlite')}`);
  });

  it('refuses --url without --key as a usage error', async () => {
    const result = await run('scripts/export.ts', ['--url', 'http://127.0.0.1:9']);
    expect(result.code).to.equal(2);
    expect(result.stderr).to.include("--url needs --key");
  });

  it('rebuilds from the log and reports the documents; a missing log is exit code 1', async () => {
    const rebuilt = await run('scripts/rebuild.ts', ['--data-dir', dataDir]);
    expect(rebuilt.code).to.equal(0);
    expect(rebuilt.stdout).to.match(/^tickets: 1 documents$/m).and.match(/^rebuilt from \d+ events in/m);
    const missing = await run('scripts/rebuild.ts', ['--data-dir', path.join(dataDir, 'nowhere')]);
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.include(`rebuild failed: no event log at ${path.join(dataDir, 'nowhere', 'events.sqlite')}`);
  });
});
