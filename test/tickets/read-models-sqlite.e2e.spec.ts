// The embedded service keeps its ticket, message and contact read models in DATA_DIR/read-models.sqlite:
// a restart resumes them, and a file built from another log is rebuilt from this one.
import { copyFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { READ_MODELS_FILE } from '../../projections/tickets-store-sqlite.js';
import { call, startTestService, type TestService } from '../support/server.js';
import { ticketId } from '../support/tickets-fixtures.js';

/** Documents and checkpoint position per store in a closed read-model file. */
const storesIn = (dataDir: string): Record<string, { docs: number; at: number | null }> => {
  const db = new Database(path.join(dataDir, READ_MODELS_FILE), { readonly: true });
  try {
    const rows = db.prepare('SELECT id, name, checkpoint FROM stores').all() as { id: number; name: string; checkpoint: string | null }[];
    return Object.fromEntries(
      rows.map((row) => [
        row.name,
        { docs: db.prepare(`SELECT count(*) FROM docs_${row.id}`).pluck().get() as number, at: row.checkpoint === null ? null : (JSON.parse(row.checkpoint) as { position: number }).position },
      ]),
    );
  } finally {
    db.close();
  }
};

describe('sqlite read models of the embedded service (e2e)', () => {
  const folders: string[] = [];
  const folder = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'sp-read-models-'));
    folders.push(dir);
    return dir;
  };
  let running: TestService | null = null;
  const start = async (dataDir: string) => (running = await startTestService({}, { dataDir }));
  const stop = async () => {
    await running?.close();
    running = null;
  };
  after(async () => {
    await stop();
    for (const dir of folders) rmSync(dir, { recursive: true, force: true });
  });

  it('keeps them in DATA_DIR and resumes them at a restart, each at the log position it had reached', async () => {
    const dataDir = folder();
    const test = await start(dataDir);
    const ws = await test.createWorkspace();
    const ids = [await ticketId(ws, { message: 'one' }), await ticketId(ws)];
    await ws.api('POST', `/api/v1/tickets/${ids[0]}/close`);
    const before = await ws.api('GET', '/api/v1/tickets?status=closed');
    const head = await test.service.core.log.headPosition();
    await stop();
    const stores = storesIn(dataDir);
    expect(stores['tickets']).to.deep.include({ docs: 2 });
    expect(stores['ticket-messages']).to.deep.include({ docs: 1 });
    expect(stores['contacts']).to.deep.include({ docs: 2 });
    expect(stores['tickets']?.at).to.be.greaterThan(0).and.at.most(head);

    const again = await start(dataDir);
    const after = await call(`${again.url}/api/v1/tickets?status=closed`, 'GET', ws.apiKey);
    expect(after.body).to.deep.equal(before.body);
    expect(after.body.total).to.equal(1);
  });

  it('rebuilds a read-model file that was built from another log', async () => {
    const [mine, other] = [folder(), folder()];
    const first = await start(mine);
    const old = await first.createWorkspace();
    await ticketId(old);
    await ticketId(old);
    await stop();
    const second = await start(other);
    const ws = await second.createWorkspace();
    const id = await ticketId(ws, { message: 'hello' });
    await stop();

    // The log is replaced (restored from another backup, say); the read models stay.
    copyFileSync(path.join(other, 'events.sqlite'), path.join(mine, 'events.sqlite'));
    for (const suffix of ['-wal', '-shm']) expect(existsSync(path.join(mine, `events.sqlite${suffix}`))).to.equal(false);
    const test = await start(mine);
    const listed = await call(`${test.url}/api/v1/tickets`, 'GET', ws.apiKey);
    expect(listed.body.total).to.equal(1);
    expect(listed.body.items[0].id).to.equal(id);
    await stop();
    expect(storesIn(mine)).to.deep.include({ tickets: { docs: 1, at: storesIn(other)['tickets']?.at ?? -1 } });
  });
});
