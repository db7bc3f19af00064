// Bad input at open: every case must end in LogUnavailable with a clear reason, the file untouched.
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { LogUnavailable } from '../../src/log/event-log.js';
import { APPLICATION_ID } from '../../src/log/sqlite-open.js';
import { openSqliteLog } from '../../src/log/sqlite.js';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-faults-'));
chmodSync(dir, 0o755); // the read-only case runs as nobody when the tests run as root
after(() => {
  chmodSync(dir, 0o755);
  rmSync(dir, { recursive: true, force: true });
});
const path = (name: string): string => join(dir, `${randomBytes(4).toString('hex')}-${name}`);
const digest = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');
const sqliteModule = fileURLToPath(new URL('../../src/log/sqlite.ts', import.meta.url));

const openError = (file: string): LogUnavailable => {
  try {
    openSqliteLog({ file });
  } catch (error) {
    expect(error).to.be.instanceOf(LogUnavailable);
    return error as LogUnavailable;
  }
  throw new Error(`opened ${file}`);
};

const event = { id: 'a'.repeat(32), type: 'ticket.created', workspaceId: 'ws', data: { subject: 'kept' } };

/** Runs `body` (ESM, with `openSqliteLog` in scope) in a child process; `uid` drops root privileges. */
const child = (body: string, uid?: number): ChildProcess => {
  const script = `const { openSqliteLog } = await import(${JSON.stringify(sqliteModule)});\n${body}`;
  return spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
    ...(uid === undefined ? {} : { uid, gid: uid }),
  });
};

const firstLine = (process: ChildProcess): Promise<string> =>
  new Promise((resolve, reject) => {
    let out = '';
    process.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
    });
    process.on('exit', () => reject(new Error(`child exited before answering: ${out}`)));
  });

describe('SQLite event log: bad input at open', function () {
  this.timeout(30_000);

  it('refuses a file that is not a database, and leaves it untouched', () => {
    const file = path('notes.db');
    writeFileSync(file, randomBytes(8192));
    const before = digest(file);
    expect(openError(file).message).to.match(/not an event log database/);
    expect(digest(file)).to.equal(before);
    expect(existsSync(`${file}-wal`)).to.equal(false);
  });

  it("refuses another application's SQLite database, and leaves it untouched", () => {
    const file = path('crm.db');
    const foreign = new Database(file);
    foreign.exec("CREATE TABLE users (name TEXT); INSERT INTO users VALUES ('ada')");
    foreign.close();
    const before = digest(file);
    expect(openError(file).message).to.match(/database of another application/);
    expect(digest(file)).to.equal(before);
    expect(existsSync(`${file}-wal`)).to.equal(false);
  });

  it('refuses a database of this log at an unknown schema version', () => {
    const file = path('future.db');
    const future = new Database(file);
    future.pragma(`application_id = ${APPLICATION_ID}`);
    future.pragma('user_version = 99');
    future.close();
    expect(openError(file).message).to.match(/schema version 99 is not supported/);
  });

  it('refuses a missing folder', () => {
    expect(openError(join(dir, 'no-such-folder', 'log.db')).message).to.match(/folder .* does not exist/);
  });

  it('refuses a read-only folder, new file or existing log', async () => {
    const folder = path('readonly');
    mkdirSync(folder);
    const existing = join(folder, 'log.db');
    const log = openSqliteLog({ file: existing });
    await log.append('ticket-1', [event], 'no_stream');
    await log.close();
    chmodSync(existing, 0o666);
    chmodSync(folder, 0o555);
    const before = digest(existing);

    // Root ignores permissions: open as nobody then.
    const uid = process.getuid?.() === 0 ? 65534 : undefined;
    for (const file of [join(folder, 'new.db'), existing]) {
      const answer = await firstLine(
        child(`try { openSqliteLog({ file: ${JSON.stringify(file)} }); console.log('opened'); } catch (e) { console.log(e.name + ': ' + e.message); }`, uid),
      );
      expect(answer).to.match(/^LogUnavailable: .*(is not writable|cannot be written)/);
    }
    expect(digest(existing)).to.equal(before);
    chmodSync(folder, 0o755);
  });

  it('refuses a log that another process holds, until that process dies', async () => {
    const file = path('shared.db');
    const seed = openSqliteLog({ file });
    await seed.append('ticket-1', [event], 'no_stream');
    await seed.close();
    const before = digest(file);

    const holder = child(`openSqliteLog({ file: ${JSON.stringify(file)} }); console.log('ready'); setInterval(() => {}, 1000);`);
    const exited = new Promise((resolve) => holder.on('exit', resolve));
    expect(await firstLine(holder)).to.equal('ready');
    try {
      expect(openError(file).message).to.match(/in use by another process/);
      expect(digest(file)).to.equal(before);
    } finally {
      holder.kill('SIGKILL');
      await exited;
    }

    const log = openSqliteLog({ file });
    expect((await log.readStream('ticket-1')).map((r) => r.data)).to.deep.equal([{ subject: 'kept' }]);
    await log.close();
  });

  it('refuses a second open in the same process while the first is open', async () => {
    const file = path('twice.db');
    const first = openSqliteLog({ file });
    expect(openError(file).message).to.match(/in use by another process/);
    await first.append('ticket-1', [event], 'no_stream');
    await first.close();
  });
});
