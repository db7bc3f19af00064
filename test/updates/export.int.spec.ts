import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { LogUnavailable, type EventLog } from '../../src/log/event-log.js';
import type { FeedItem } from '../../src/updates/feed-item.js';
import { apiPages, logPages, openExistingLog, parseInstant, writeNdjson, type ExportRange } from '../../scripts/export.js';
import { startTestService, type TestWorkspace } from '../support/server.js';
import { appendEvents, internalEvent, operatorStatus, ticketUpdated } from '../support/updates-events.js';

const ALL: ExportRange = { from: 0, to: Number.MAX_SAFE_INTEGER };

const ndjson = async (pages: AsyncIterable<FeedItem[]>): Promise<FeedItem[]> => {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  const count = await writeNdjson(pages, out);
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  expect(lines.pop()).to.equal('');
  expect(lines).to.have.length(count);
  return lines.map((l) => JSON.parse(l) as FeedItem);
};

describe('scripts/export.ts (int)', () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'sp-export-'));
  let a: TestWorkspace;
  let viaApi: FeedItem[];
  let otherIds: string[];

  before(async () => {
    const svc = await startTestService({}, { dataDir });
    try {
      a = await svc.createWorkspace();
      const b = await svc.createWorkspace();
      const log = svc.service.core.log;
      // More than one export page (5000) and more than one API page (1000).
      for (let i = 0; i < 6; i++) await appendEvents(log, a.workspaceId, Array.from({ length: 1100 }, (_, j) => (j % 10 === 0 ? operatorStatus(`u${j}`) : ticketUpdated(`t${i}-${j}`))));
      await appendEvents(log, a.workspaceId, [internalEvent]);
      otherIds = (await appendEvents(log, b.workspaceId, [ticketUpdated('b1'), ticketUpdated('b2')])).map((r) => r.id);
      viaApi = [];
      for (let offset = 0; ; ) {
        const page = await a.api('GET', `/api/v1/updates?offset=${offset}&limit=1000&timeout=0`);
        if (page.body.items.length === 0) break;
        viaApi.push(...page.body.items);
        offset = page.body.next_offset;
      }
      expect(viaApi).to.have.length(6600);

      // While the service runs, its log is locked; the API route still exports.
      expect(() => openExistingLog(dataDir)).to.throw(LogUnavailable, /in use/);
      expect(await ndjson(apiPages(svc.url, a.apiKey, ALL))).to.deep.equal(viaApi);
    } finally {
      await svc.service.close();
    }
  });
  after(() => rmSync(dataDir, { recursive: true, force: true }));

  const withLog = async <T>(use: (log: EventLog) => Promise<T>): Promise<T> => {
    const log = openExistingLog(dataDir);
    try {
      return await use(log);
    } finally {
      await log.close();
    }
  };

  it('exports one workspace exactly as /updates serves it', async () => {
    expect(await withLog((log) => ndjson(logPages(log, ALL, a.workspaceId)))).to.deep.equal(viaApi);
  });

  it('exports every workspace\'s public events and nothing internal', async () => {
    const items = await withLog((log) => ndjson(logPages(log, ALL)));
    expect(items.map((i) => i.id)).to.deep.equal([...viaApi.map((i) => i.id), ...otherIds]);
  });

  it('bounds by ISO timestamps or offsets (from inclusive, to exclusive) and filters by type', async () => {
    const [from, to] = [viaApi[100] as FeedItem, viaApi[2500] as FeedItem];
    expect(parseInstant(from.timestamp)).to.equal(from.offset);
    const range = { from: parseInstant(from.timestamp), to: to.offset };
    for (const workspace of [a.workspaceId, undefined]) {
      const items = await withLog((log) => ndjson(logPages(log, range, workspace)));
      expect(items).to.deep.equal(viaApi.slice(100, 2500));
      const statuses = await withLog((log) => ndjson(logPages(log, { ...range, types: ['operator.status.changed'] }, workspace)));
      expect(statuses).to.deep.equal(viaApi.slice(100, 2500).filter((i) => i.type === 'operator.status.changed'));
    }
  });

  it('runs from the command line into a file', async () => {
    const out = path.join(dataDir, 'export.ndjson');
    await promisify(execFile)('npx', ['tsx', 'scripts/export.ts', '--data-dir', dataDir, '--workspace', a.workspaceId, '--types', 'ticket.updated', '--out', out]);
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as FeedItem);
    expect(lines).to.deep.equal(viaApi.filter((i) => i.type === 'ticket.updated'));
  });

  it('refuses a mistyped data folder instead of creating an empty log', () => {
    expect(() => openExistingLog(path.join(dataDir, 'nope'))).to.throw(/no event log/);
  });
});
