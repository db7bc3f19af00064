// Shared mode: several processes of one host on one SQLite log. Real child processes (tsx) append
// concurrently to the same streams and workspaces while a third one subscribes.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { LogUnavailable, type RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-shared-'));
const freshFile = (): string => join(dir, `${randomBytes(6).toString('hex')}.db`);
after(() => rmSync(dir, { recursive: true, force: true }));

const modules = {
  sqlite: fileURLToPath(new URL('../../src/log/sqlite.ts', import.meta.url)),
  port: fileURLToPath(new URL('../../src/log/event-log.ts', import.meta.url)),
};

interface Child {
  /** Resolves once the child has printed its first line. */
  readonly ready: Promise<void>;
  /** Sends a line to the child's standard input. */
  send(line: string): void;
  /** The child's output after its first line; resolves once it exited 0. */
  readonly output: Promise<string>;
}

/**
 * Runs an ESM `body` with openSqliteLog, WrongExpectedRevision, hex() and `started()` (resolves at the
 * first line on standard input) in scope.
 */
const runChild = (body: string): Child => {
  const script = `
    import { randomBytes } from 'node:crypto';
    import { createInterface } from 'node:readline';
    const { openSqliteLog } = await import(${JSON.stringify(modules.sqlite)});
    const { WrongExpectedRevision } = await import(${JSON.stringify(modules.port)});
    const hex = () => randomBytes(16).toString('hex');
    const started = () => new Promise((resolve) => createInterface({ input: process.stdin }).once('line', () => {
      process.stdin.destroy();
      resolve();
    }));
    ${body}`;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  let markReady = (): void => {};
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (out.includes('\n')) markReady();
  });
  const output = new Promise<string>((resolve, reject) =>
    child.on('exit', (code) => {
      child.stdin.destroy();
      if (code === 0) resolve(out.slice(out.indexOf('\n') + 1));
      else reject(new Error(`child exited with ${String(code)}: ${out.slice(-500)}`));
    }),
  );
  return { ready, send: (line) => child.stdin.write(`${line}\n`), output };
};

const ROUNDS = 300;
const WRITERS = 8;
const APPENDS = 150;
const WORKSPACES = ['ws-a', 'ws-b'];
/** Both writers' clocks stand still: every offset then comes from the previous one, whoever committed it. */
const STALLED_CLOCK = 1_000_000;

/**
 * One writer process: a racer claims revision r of stream `race` for r = 0..ROUNDS-1 with expected
 * revision r-1 (each round has exactly one winner across the processes, whatever the timing), while
 * WRITERS concurrent writers append to streams and workspaces the other process writes too.
 * Both run on a stalled clock.
 */
const writerProcess = (file: string): Child =>
  runChild(`
    const log = openSqliteLog({ file: ${JSON.stringify(file)}, shared: true, clock: () => ${STALLED_CLOCK} });
    console.log('ready');
    await started();
    const wins = [];
    const acknowledged = [];
    const race = async () => {
      for (let r = 0; r < ${ROUNDS}; r += 1) {
        const id = hex();
        try {
          await log.append('race', [{ id, type: 'ticket.updated', workspaceId: 'ws-a', data: { r } }], r === 0 ? 'no_stream' : r - 1);
          wins.push([r, id]);
          acknowledged.push(id);
        } catch (error) {
          if (!(error instanceof WrongExpectedRevision)) throw error;
        }
      }
    };
    const writer = async (w) => {
      for (let i = 0; i < ${APPENDS}; i += 1) {
        const id = hex();
        const workspaceId = ${JSON.stringify(WORKSPACES)}[(w + i) % 2];
        await log.append('shared-' + (i % 3), [{ id, type: 'message.created', workspaceId, data: { w, i } }], 'any');
        acknowledged.push(id);
      }
    };
    await Promise.all([race(), ...Array.from({ length: ${WRITERS} }, (_, w) => writer(w))]);
    await log.close();
    console.log(JSON.stringify({ wins, acknowledged }));
  `);

/**
 * A subscriber process: prints "position id" for every event, live from other processes' commits,
 * until it has `total`. With `types`, it asks for those types in small pages (each page a read by
 * type: one snapshot per page, or another process's commit between its queries is skipped).
 */
const subscriberProcess = (file: string, total: number, types?: readonly string[]): Child =>
  runChild(`
    const log = openSqliteLog({ file: ${JSON.stringify(file)}, shared: true${types === undefined ? '' : ', pageSize: 7'} });
    let seen = 0;
    const subscription = log.subscribe({ after: 0${types === undefined ? '' : `, types: ${JSON.stringify(types)}`} }, (event) => {
      process.stdout.write(event.position + ' ' + event.id + '\\n');
      seen += 1;
      if (seen === ${total}) void subscription.stop();
    });
    console.log('ready');
    await subscription.done;
    await log.close();
  `);

const expectStrictlyIncreasing = (values: readonly number[]): void =>
  values.slice(1).forEach((value, i) => expect(value).to.be.greaterThan(values[i] as number));

describe('SQLite event log: shared mode across processes', function () {
  this.timeout(120_000);

  it('two writer processes and a subscriber process on one fresh file: nothing lost, offsets increasing, one winner per revision', async () => {
    const file = freshFile();
    const total = ROUNDS + 2 * WRITERS * APPENDS;
    // All three open the brand-new file at once (creating the schema is raced too); the writers start
    // together once the subscriber is live.
    const subscriber = subscriberProcess(file, total);
    const typedSubscriber = subscriberProcess(file, total, ['message.created', 'ticket.updated']);
    const writerChildren = [writerProcess(file), writerProcess(file)];
    await Promise.all([subscriber, typedSubscriber, ...writerChildren].map((child) => child.ready));
    writerChildren.forEach((child) => child.send('go'));
    const writers = (await Promise.all(writerChildren.map((child) => child.output))).map(
      (out) => JSON.parse(out) as { wins: [number, string][]; acknowledged: string[] },
    );
    const subscribed = (await subscriber.output).trim().split('\n');
    const subscribedByType = (await typedSubscriber.output).trim().split('\n');

    const log = openSqliteLog({ file, shared: true });
    const all = await log.readAll({ after: 0 });
    const race = await log.readStream('race');
    await log.close();

    const acknowledged = writers.flatMap((w) => w.acknowledged);
    expect(all).to.have.length(total);
    expect(new Set(all.map((r) => r.id))).to.deep.equal(new Set(acknowledged));
    expectStrictlyIncreasing(all.map((r) => r.position));

    const wins = writers.flatMap((w) => w.wins).sort(([a], [b]) => a - b);
    expect(wins.map(([round]) => round)).to.deep.equal(Array.from({ length: ROUNDS }, (_, r) => r));
    expect(race.map((r) => [r.revision, r.id])).to.deep.equal(wins);

    for (const stream of ['shared-0', 'shared-1', 'shared-2']) {
      const revisions = all.filter((r) => r.stream === stream).map((r) => r.revision);
      expect(revisions).to.deep.equal(revisions.map((_, i) => i));
    }
    for (const workspaceId of WORKSPACES) {
      const offsets = all.filter((r) => r.workspaceId === workspaceId).map((r) => r.offset);
      expect(offsets).to.deep.equal(offsets.map((_, i) => STALLED_CLOCK + i));
    }

    expect(subscribed).to.deep.equal(all.map((r: RecordedEvent) => `${r.position} ${r.id}`));
    expect(subscribedByType).to.deep.equal(subscribed);
  });

  it("watchFeed announces another process's public events, each once the feed returns it", async () => {
    const file = freshFile();
    const relay = openSqliteLog({ file, shared: true });
    const writer = runChild(`
      const log = openSqliteLog({ file: ${JSON.stringify(file)}, shared: true });
      console.log('ready');
      await started();
      const event = (workspaceId, type) => ({ id: hex(), type, workspaceId, data: {} });
      const { records } = await log.append('ticket-1', [
        event('ws-a', 'ticket.created'), event('ws-a', 'apikey.issued'), event('ws-b', 'ticket.created'), event('ws-a', 'message.created'),
      ], 'no_stream');
      await log.close();
      console.log(JSON.stringify(records.filter((r) => r.offset !== null).map((r) => [r.workspaceId, r.offset])));
    `);
    const announced: [string, number | 'not in the feed'][] = [];
    let allAnnounced = (): void => {};
    const three = new Promise<void>((resolve) => (allAnnounced = resolve));
    await writer.ready;
    const watch = await relay.watchFeed(async (workspaceId, offset) => {
      const [item] = await relay.readFeed({ workspaceId, fromOffset: offset, limit: 1 });
      announced.push([workspaceId, item?.offset === offset ? offset : 'not in the feed']);
      if (announced.length === 3) allAnnounced();
    });
    writer.send('go');
    const appended = JSON.parse(await writer.output) as [string, number][];
    await three;
    await watch.stop();
    await relay.close();
    expect(appended).to.have.length(3);
    expect(announced).to.deep.equal(appended);
  });

  it('embedded and shared mode refuse each other', async () => {
    const file = freshFile();
    const shared = openSqliteLog({ file, shared: true });
    expect(() => openSqliteLog({ file })).to.throw(LogUnavailable, /in use by another process/);
    await shared.close();

    const embedded = openSqliteLog({ file });
    expect(() => openSqliteLog({ file, shared: true, busyTimeoutMs: 50 })).to.throw(LogUnavailable, /in use by another process/);
    await embedded.close();
  });
});
