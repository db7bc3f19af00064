import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import { expect } from 'chai';
import fc from 'fast-check';
import type * as t from 'io-ts';
import { EventData } from '../../src/domain/catalogue.js';
import { PUBLIC_EVENT_TYPES, type PublicEventType } from '../../src/domain/event-types.js';
import { TICKET_OPENED } from '../../src/domain/ticket/state.js';
import { LogUnavailable, type EventLog, type Json, type JsonObject, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';
import { feedItem, type FeedItem } from '../../src/updates/feed-item.js';
import { apiPages, logPages, openExistingLog, writeNdjson, type ExportRange, type NdjsonChunk } from '../../scripts/export.js';
import { parseInstant } from '../../src/cli/args.js';
import { startTestService, type TestWorkspace } from '../support/server.js';
import { appendEvents, internalEvent, operatorStatus, ticketUpdated } from '../support/updates-events.js';

const ALL: ExportRange = { from: 0, to: Number.MAX_SAFE_INTEGER };

const ndjson = async (pages: AsyncIterable<NdjsonChunk>): Promise<FeedItem[]> => {
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

  const withLog = async <T>(use: (log: SqliteEventLog) => Promise<T>): Promise<T> => {
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

// The export builds its lines as text from the stored data (src/updates/feed-item.ts feedLines); these
// specs hold it byte-identical to JSON.stringify(feedItem(record)) of the records readAll and readFeed
// return, over logs with every catalogue event type and the text that is hardest to carry over.

/** Text that JSON escapes, or that UTF-8 and UTF-16 disagree on: quotes, controls, U+2028, emoji, lone surrogates. */
const awkward = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constantFrom('', '"', '\\', '\n\t\u0000\u001f', '\u007f\u2028\u2029', 'é ü 中文', '😀👍🏽', '\ud800', 'a\udfffb', '</script>', 'a/b?c=d&e#f'),
);
/** Link targets must stay well-formed UTF-16: encodeURIComponent throws on a lone surrogate in both paths alike. */
const linkText = fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.constantFrom('', 'a/b', 't 1', 'é😀', '"\\'));
const number = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -0, 1e21, 5e-324, Number.MAX_SAFE_INTEGER + 2));

/** Data shaped by a catalogue codec, with awkward text wherever the codec takes a string. */
const arbitraryOf = (codec: t.Mixed, key = ''): fc.Arbitrary<Json> => {
  const c = codec as t.Mixed & { _tag: string; props?: t.Props; types?: t.Mixed[]; keys?: Record<string, unknown>; type?: t.Mixed };
  const props = (p: t.Props) => Object.fromEntries(Object.entries(p).map(([k, v]) => [k, arbitraryOf(v, k)]));
  switch (c._tag) {
    case 'StringType': return key === 'ticket_id' || key === 'id' ? linkText : awkward;
    case 'NumberType': return number;
    case 'BooleanType': return fc.boolean();
    case 'NullType': return fc.constant(null);
    case 'KeyofType': return fc.constantFrom(...Object.keys(c.keys ?? {}));
    case 'UnionType': return fc.oneof(...(c.types ?? []).map((u) => arbitraryOf(u, key)));
    case 'ArrayType': return fc.array(arbitraryOf(c.type as t.Mixed), { maxLength: 2 });
    case 'InterfaceType': return fc.record(props(c.props ?? {}));
    case 'PartialType': return fc.record(props(c.props ?? {}), { requiredKeys: [] }) as fc.Arbitrary<Json>;
    case 'IntersectionType':
      return fc.tuple(...(c.types ?? []).map((u) => arbitraryOf(u, key))).map((parts) => Object.assign({}, ...parts) as Json);
    default: throw new Error(`no arbitrary for io-ts ${c._tag}`);
  }
};

/** Fields beyond the codec's: integer-like keys (JSON.stringify puts them first), __proto__, link ids of any JSON type. */
const extraFields = fc.dictionary(fc.oneof(awkward, fc.constantFrom('1', '0', '__proto__', 'ticket_id', 'id')), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });

/** A public event of any catalogue type, sometimes with extra fields. */
const publicEvent = fc.constantFrom(...PUBLIC_EVENT_TYPES).chain((type) =>
  fc.record({
    type: fc.constant<string>(type),
    data: fc.tuple(arbitraryOf(EventData[type]), fc.option(extraFields)).map(([data, extra]) => ({ ...(extra ?? {}), ...(data as JsonObject) })),
  }),
);
const internal = fc.record({
  type: fc.constantFrom(TICKET_OPENED, 'subscription.created', 'delivery.attempted'),
  data: fc.record({ ticket_id: linkText, note: awkward }),
});

const WORKSPACES = ['0f'.repeat(16), 'w"é\\😀', 'third'] as const;

/** One append: a stream of events of one workspace, some internal, maybe deleted later. */
const append = fc.record({
  workspace: fc.constantFrom(...WORKSPACES),
  events: fc.array(fc.oneof({ weight: 4, arbitrary: publicEvent }, { weight: 1, arbitrary: internal }), { minLength: 1, maxLength: 6 }),
  deleted: fc.nat(9).map((n) => n < 2),
});

const START = 1_763_765_235_000_000;

/** Clock steps: within a second, across one, and backwards (offsets of other workspaces then go down). */
const clockSteps = fc.array(fc.constantFrom(1, 37, 1_000, 999_999, 1_000_000, 2_500_000, -3_000_000), { minLength: 1, maxLength: 20 });

interface Append {
  readonly workspace: string;
  readonly events: readonly { readonly type: string; readonly data: unknown }[];
  readonly deleted: boolean;
}

const buildLog = async (file: string, appends: readonly Append[], steps: readonly number[]): Promise<SqliteEventLog> => {
  let now = START;
  let step = 0;
  const log = openSqliteLog({ file, clock: () => (now += steps[step++ % steps.length] as number) });
  for (const [i, a] of appends.entries()) {
    const stream = `s-${i}`;
    const events = a.events.map((e): NewEvent => ({ id: randomId(), type: e.type, workspaceId: a.workspace, data: e.data as JsonObject }));
    await log.append(stream, events, 'no_stream');
    if (a.deleted) await log.deleteStream(stream);
  }
  return log;
};

/** The lines as JSON.stringify(feedItem(record)) of the records the EventLog port reads. */
const expected = async (log: EventLog, range: ExportRange, workspaceId?: string): Promise<string> => {
  const records = workspaceId === undefined ? await log.readAll({ after: 0 }) : await log.readFeed({ workspaceId, fromOffset: 0, limit: 1_000_000 });
  return records
    .filter((r) => r.offset !== null && r.offset >= range.from && r.offset < range.to && (range.types?.includes(r.type as PublicEventType) ?? true))
    .map((r) => `${JSON.stringify(feedItem(r))}\n`)
    .join('');
};

const exported = async (log: SqliteEventLog, range: ExportRange, workspaceId?: string): Promise<string> => {
  const out = new PassThrough();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  const count = await writeNdjson(logPages(log, range, workspaceId), out);
  const text = Buffer.concat(chunks).toString('utf8');
  expect(text.split('\n')).to.have.length(count + 1);
  return text;
};

describe('scripts/export.ts lines are JSON.stringify(feedItem(record)) byte for byte (int)', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'sp-export-lines-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('over a log of every event type, several pages long: whole, per workspace, a time range, a type filter', async () => {
    // Two thirds in one workspace, so its feed too spans several pages.
    const appends: Append[] = fc.sample(append, { numRuns: 1100, seed: 42 }).map((a, i) => (i % 3 === 0 ? a : { ...a, workspace: WORKSPACES[1] }));
    // Every catalogue type at least once, in every workspace.
    const everyType = PUBLIC_EVENT_TYPES.flatMap((type) => fc.sample(publicEvent.filter((e) => e.type === type), { numRuns: 1, seed: 3 }));
    appends.push(...WORKSPACES.map((workspace) => ({ workspace, events: everyType, deleted: false })));
    const log = await buildLog(path.join(dir, 'pages.sqlite'), appends, fc.sample(clockSteps, { numRuns: 1, seed: 1 })[0] as number[]);
    try {
      const all = await expected(log, ALL);
      const lines = all.split('\n').length - 1;
      expect(lines, 'more than two export pages').to.be.greaterThan(2000);
      expect((await expected(log, ALL, WORKSPACES[1])).split('\n'), 'a workspace of more than one page').to.have.length.greaterThan(1001);
      expect(new Set(all.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as FeedItem).type))).to.have.length(PUBLIC_EVENT_TYPES.length);
      for (const hard of ['\\ud800', '\\u0000', '\\"', '\u2028', '😀', '"__proto__":', '"1":']) expect(all, 'the log holds hard text').to.include(hard);
      expect(await exported(log, ALL)).to.equal(all);

      const offsets = all.split('\n').filter((l) => l !== '').map((l) => (JSON.parse(l) as FeedItem).offset).sort((x, y) => x - y);
      const range = { from: offsets[300] as number, to: offsets[1800] as number };
      const types: PublicEventType[] = ['message.created', 'contact.identified', 'billing.balance_low'];
      for (const workspace of [undefined, ...WORKSPACES]) {
        for (const r of [ALL, range, { ...ALL, types }, { ...range, types }]) {
          const want = await expected(log, r, workspace);
          expect(want, 'the case is not empty').to.not.equal('');
          expect(await exported(log, r, workspace)).to.equal(want);
        }
      }
    } finally {
      await log.close();
    }
  });

  it('holds for any log, range, type filter and workspace (property)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(append, { minLength: 1, maxLength: 12 }),
        clockSteps,
        fc.record({ from: fc.nat(6_000_000), length: fc.nat(12_000_000) }),
        fc.option(fc.subarray([...PUBLIC_EVENT_TYPES], { minLength: 1, maxLength: 4 })),
        fc.option(fc.constantFrom(...WORKSPACES)),
        async (appends, steps, window, types, workspace) => {
          const log = await buildLog(path.join(dir, `p${run++}.sqlite`), appends, steps);
          try {
            const from = START + window.from;
            const range: ExportRange = { from, to: from + window.length, ...(types === null ? {} : { types }) };
            for (const r of [ALL, range]) expect(await exported(log, r, workspace ?? undefined)).to.equal(await expected(log, r, workspace ?? undefined));
          } finally {
            await log.close();
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
