// Two connections of one process on one shared SQLite log (the embedded role's main and dispatcher
// threads): the announcing one's commits wake the hearing one's live subscriptions at once, not at
// its next poll of the file. Here both sit on this thread; BroadcastChannel is the same across threads.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { RecordedEvent } from '../../src/log/event-log.js';
import { openSqliteLog, type SqliteEventLog } from '../../src/log/sqlite.js';

describe('SQLite event log: commits announced to another connection of the process (int)', () => {
  let dir: string;
  const logs: SqliteEventLog[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqlite-channel-'));
  });

  afterEach(async () => {
    for (const log of logs.splice(0)) await log.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A writer and a reader whose poll would take a minute: only the channel can wake the reader sooner. */
  const pair = (channel: boolean) => {
    const file = join(dir, 'events.sqlite');
    const name = `test:${randomBytes(6).toString('hex')}`;
    const writer = openSqliteLog({ file, shared: true, ...(channel ? { commitsChannel: { name, role: 'announce' as const } } : {}) });
    const reader = openSqliteLog({ file, shared: true, pollIntervalMs: 60_000, ...(channel ? { commitsChannel: { name, role: 'hear' as const } } : {}) });
    logs.push(writer, reader);
    return { writer, reader };
  };

  const firstSeen = async (channel: boolean, waitMs: number): Promise<RecordedEvent | null> => {
    const { writer, reader } = pair(channel);
    const seen: RecordedEvent[] = [];
    const subscription = reader.subscribe({ after: 0 }, (event) => void seen.push(event));
    await new Promise((resolve) => setTimeout(resolve, 20));
    await writer.append('ticket-1', [{ id: randomBytes(16).toString('hex'), type: 'ticket.created', workspaceId: 'w', data: {} }], 'no_stream');
    const deadline = Date.now() + waitMs;
    while (seen.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    await subscription.stop();
    return seen[0] ?? null;
  };

  it('wakes the hearing connection at each commit of the announcing one', async () => {
    expect(await firstSeen(true, 1000)).to.include({ stream: 'ticket-1' });
  });

  it('leaves a connection without the channel to its poll', async () => {
    expect(await firstSeen(false, 300)).to.equal(null);
  });
});
