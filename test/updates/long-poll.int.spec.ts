import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { expect } from 'chai';
import { openSqliteLog } from '../../src/log/sqlite.js';
import type { EventLog, LogSubscription } from '../../src/log/event-log.js';
import { createLongPoll, type LongPoll } from '../../src/updates/long-poll.js';
import { createMemoryNotifier } from '../../src/updates/memory.js';
import { startFeedPublisher } from '../../src/updates/publisher.js';
import type { UpdatesQuery } from '../../src/updates/query.js';
import { appendEvents, ticketUpdated } from '../support/updates-events.js';

describe('long polls over the SQLite log (int)', () => {
  let dir: string;
  let log: EventLog;
  let publisher: LogSubscription;
  let longPoll: LongPoll;
  const query = (offset: number, timeoutMs = 60_000): UpdatesQuery => ({ offset, types: undefined, limit: 100, timeoutMs });
  const settle = () => new Promise((r) => setTimeout(r, 20));

  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'sp-longpoll-'));
    log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    const notifier = createMemoryNotifier();
    publisher = await startFeedPublisher(log, notifier);
    longPoll = createLongPoll(log, notifier);
  });
  afterEach(async () => {
    await publisher.stop();
    await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers waiting polls empty on drain, and later polls without waiting', async () => {
    const waiting = longPoll.poll('w1', query(0), new AbortController().signal);
    await settle();
    expect(longPoll.waiting()).to.equal(1);
    longPoll.drain();
    expect(await waiting).to.deep.equal([]);
    const [record] = await appendEvents(log, 'w1', [ticketUpdated('t')]);
    expect((await longPoll.poll('w1', query(0), new AbortController().signal)).map((r) => r.id)).to.deep.equal([record?.id]);
    expect(await longPoll.poll('w1', query((record?.offset as number) + 1), new AbortController().signal)).to.deep.equal([]);
    expect(longPoll.waiting()).to.equal(0);
  });

  it('an aborted poll stops waiting at once', async () => {
    const gone = new AbortController();
    const waiting = longPoll.poll('w1', query(0), gone.signal);
    await settle();
    gone.abort();
    expect(await waiting).to.deep.equal([]);
    expect(longPoll.waiting()).to.equal(0);
  });

  it('many concurrent waiters of one workspace each receive an event appended once', async () => {
    const polls = Array.from({ length: 50 }, () => longPoll.poll('w2', query(0), new AbortController().signal));
    await settle();
    const [record] = await appendEvents(log, 'w2', [ticketUpdated('t')]);
    for (const events of await Promise.all(polls)) expect(events.map((r) => r.id)).to.deep.equal([record?.id]);
  });
});
