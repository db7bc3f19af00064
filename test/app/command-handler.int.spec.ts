// The command handler on the real SQLite log: commands on one stream queue and batch instead of
// racing (none fails because of another), refusals are decided on the state the commands before them
// leave, two processes' handlers on one shared file retry their lost races until every command lands,
// and a race lost past the bound is StreamContended (the API's 503), never a crash.
import { expect } from 'chai';
import { left, right } from 'fp-ts/lib/Either.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createCommandHandler, StreamContended } from '../../src/app/command-handler.js';
import type { Aggregate } from '../../src/domain/aggregate.js';
import { domainError } from '../../src/domain/errors.js';
import { WrongExpectedRevision, type EventLog, type ExpectedRevision, type NewEvent } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { randomId } from '../../src/shared/ids.js';

/** A counter that takes at most `limit` increments; each increment records who asked. */
const counter = (limit: number): Aggregate<number, { by: string; explode?: boolean }> => ({
  initial: 0,
  evolve: (n, e) => (e.type === 'counted' ? n + 1 : n),
  decide: (c, n) => {
    if (c.explode === true) throw new Error('a bug in decide');
    return n >= limit ? left(domainError('CONFLICT', 'full')) : right([{ type: 'counted', data: { by: c.by } }]);
  },
});

describe('command handler (int, SQLite)', () => {
  let dir: string;
  const logs: EventLog[] = [];
  const open = (shared = false) => {
    const log = openSqliteLog({ file: path.join(dir, 'events.sqlite'), shared });
    logs.push(log);
    return log;
  };
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'handler-'));
  });
  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('lands 64 concurrent commands on one stream, each once, in the order they were issued', async () => {
    const log = open();
    const handle = createCommandHandler(log, randomId);
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) => handle(counter(1000), 'count-1', 'ws', { by: `w${i}` }, undefined)));
    expect(results.every((r) => r._tag === 'Right')).to.equal(true);
    const events = await log.readStream('count-1');
    expect(events.map((e) => e.data['by'])).to.deep.equal(Array.from({ length: 64 }, (_, i) => `w${i}`));
    // Each command gets its own event back and the state it left.
    results.forEach((r, i) => {
      if (r._tag !== 'Right') throw new Error('refused');
      expect(r.right.records.map((e) => e.data['by'])).to.deep.equal([`w${i}`]);
      expect(r.right.state).to.equal(i + 1);
    });
  });

  it('decides each refusal on the state the commands before it leave', async () => {
    const handle = createCommandHandler(open(), randomId);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => handle(counter(10), 'count-2', 'ws', { by: `w${i}` }, undefined)));
    expect(results.map((r) => r._tag)).to.deep.equal([...Array(10).fill('Right'), ...Array(10).fill('Left')]);
  });

  it('fails only the command whose decide throws; the rest of its batch lands', async () => {
    const log = open();
    const handle = createCommandHandler(log, randomId);
    const settled = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => handle(counter(100), 'count-3', 'ws', { by: `w${i}`, explode: i === 4 }, undefined)));
    expect(settled.map((s) => s.status)).to.deep.equal(Array.from({ length: 10 }, (_, i) => (i === 4 ? 'rejected' : 'fulfilled')));
    expect(await log.readStream('count-3')).to.have.length(9);
  });

  it('appends a command that brings its own appender alone and through it; the commands around it still batch', async () => {
    const log = open();
    const handle = createCommandHandler(log, randomId);
    const through: string[] = [];
    const appender = async (stream: string, events: readonly NewEvent[], expected: ExpectedRevision) => {
      through.push(...events.map((e) => String(e.data['by'])));
      return log.append(stream, events, expected);
    };
    const aggregate = counter(100);
    const before = log.stats().transactions;
    const results = await Promise.all(Array.from({ length: 9 }, (_, i) => handle(aggregate, 'count-5', 'ws', { by: `w${i}` }, undefined, i === 4 ? appender : undefined)));
    expect(results.every((r) => r._tag === 'Right')).to.equal(true);
    expect(through).to.deep.equal(['w4']);
    expect((await log.readStream('count-5')).map((e) => e.data['by'])).to.deep.equal(Array.from({ length: 9 }, (_, i) => `w${i}`));
    // w0 alone, w1..w3 batched, w4 alone, w5..w8 batched.
    expect(log.stats().transactions - before).to.equal(4);
  });

  it('fails only the command whose appender fails; the commands after it land', async () => {
    const log = open();
    const handle = createCommandHandler(log, randomId);
    const refusing = async () => Promise.reject(new Error('the month is used up'));
    const aggregate = counter(100);
    const settled = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => handle(aggregate, 'count-6', 'ws', { by: `w${i}` }, undefined, i === 2 ? refusing : undefined)));
    expect(settled.map((s) => s.status)).to.deep.equal(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((await log.readStream('count-6')).map((e) => e.data['by'])).to.deep.equal(['w0', 'w1', 'w3', 'w4']);
  });

  it('lands every command when two processes\' handlers write one stream of a shared file', async () => {
    const a = open(true);
    const b = open(true);
    const handlers = [createCommandHandler(a, randomId), createCommandHandler(b, randomId)];
    const results = await Promise.all(Array.from({ length: 64 }, (_, i) => (handlers[i % 2] as (typeof handlers)[0])(counter(1000), 'count-4', 'ws', { by: `w${i}` }, undefined)));
    expect(results.every((r) => r._tag === 'Right')).to.equal(true);
    const by = (await a.readStream('count-4')).map((e) => String(e.data['by']));
    expect(by).to.have.length(64);
    expect(new Set(by).size).to.equal(64);
  });

  it('gives up with StreamContended once another writer has kept winning past the bound', async () => {
    const log = open();
    // Every append loses its race, as under a writer that never stops.
    const losing: EventLog = { ...log, append: async (stream) => Promise.reject(new WrongExpectedRevision(stream, 0, 1)) };
    const handle = createCommandHandler(losing, randomId, undefined, { contentionBoundMs: 200 });
    const started = Date.now();
    const outcome = await handle(counter(10), 'count-5', 'ws', { by: 'x' }, undefined).then(
      () => null,
      (error: unknown) => error,
    );
    expect(outcome).to.be.instanceOf(StreamContended);
    expect(Date.now() - started).to.be.within(150, 2_000);
  });
});
