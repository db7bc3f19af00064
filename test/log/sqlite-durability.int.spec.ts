// Which connections fsync their commits: every one that writes what a client is told of, and not the
// delivery engine's (its own bookkeeping; see OpenMode.durability). Read back from SQLite itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { openDispatcherLog, openRoleLog } from '../../src/bus/role-log.js';
import { loadConfig } from '../../src/config/config.js';
import { systemMicros } from '../../src/log/clock.js';
import type { SqliteEventLog } from '../../src/log/sqlite.js';

describe('SQLite log durability per connection', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sqlite-durability-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const config = (role: string) => loadConfig({ DATA_DIR: dir, ADMIN_TOKEN: 'admin-token', ROLE: role, ...(role === 'all' ? {} : { KAFKA_BROKERS: '127.0.0.1:1', REDIS_URL: 'redis://127.0.0.1:1' }) });

  const durabilityOf = async (open: () => Promise<unknown>): Promise<string> => {
    const log = (await open()) as SqliteEventLog;
    try {
      return log.stats().durability;
    } finally {
      await log.close();
    }
  };

  it('fsyncs the commits of the embedded main thread and of the API and relay roles', async () => {
    for (const role of ['all', 'api', 'relay']) expect(await durabilityOf(() => openRoleLog(config(role), systemMicros)), role).to.equal('full');
  });

  it('does not fsync the commits of the delivery engine: the embedded dispatcher thread and the dispatcher role', async () => {
    expect(await durabilityOf(() => openDispatcherLog(config('all'), systemMicros))).to.equal('relaxed');
    expect(await durabilityOf(() => openRoleLog(config('dispatcher'), systemMicros))).to.equal('relaxed');
  });
});
