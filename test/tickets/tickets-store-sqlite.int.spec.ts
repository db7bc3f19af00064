import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { openSqliteDocumentStores, ReadModelsUnavailable, type SqliteDocumentStores } from '../../projections/tickets-store-sqlite.js';
import { StoreUnavailable } from '../../projections/tickets-store.js';
import { createProjectionRunner, ProjectionReset } from '../../src/app/projection-runner.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { documentStoreContract, ref, ROWS, type Row } from './document-store.contract.js';

const folder = mkdtempSync(path.join(tmpdir(), 'sp-sqlite-store-'));
const opened: SqliteDocumentStores[] = [];
let files = 0;
const newFile = () => path.join(folder, `read-models-${++files}.sqlite`);
const open = (file: string, batch?: number) => {
  const stores = openSqliteDocumentStores({ file, ...(batch === undefined ? {} : { batch }) });
  opened.push(stores);
  return stores;
};
after(async () => {
  for (const stores of opened) await stores.close();
  rmSync(folder, { recursive: true, force: true });
});

// Every handle is a store of the same stores object, as every runner of the embedded process.
documentStoreContract('sqlite', async () => {
  const stores = open(newFile());
  return () => stores.open(ROWS);
});

describe('sqlite document store', () => {
  const doc = (id: string, n: number, over: Partial<Row> = {}): Row => ({ id, ws: 'w1', status: 'open', contact_id: null, n, ...over });

  /** A closed file whose store of ROWS holds one document, at checkpoint 1. */
  const fileWithOneDocument = async (): Promise<string> => {
    const file = newFile();
    const stores = open(file);
    const store = stores.open(ROWS);
    await store.checkpoint();
    store.apply(ref(1), 'a', () => doc('a', 1));
    await stores.close();
    return file;
  };

  it('resumes from its checkpoint after a restart: a runner applies only the events after it', async () => {
    const dir = mkdtempSync(path.join(folder, 'runner-'));
    const log = openSqliteLog({ file: path.join(dir, 'events.sqlite') });
    const file = path.join(dir, 'read-models.sqlite');
    const append = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const id = `t${i % 10}`;
        await log.append(`row-${id}`, [{ id: randomBytes(16).toString('hex'), type: 'row.saved', workspaceId: 'w1', data: { id } }], 'any');
      }
    };
    /** A runner over a store of the file, counting the events it applies. */
    const run = async () => {
      const stores = open(file);
      const store = stores.open(ROWS);
      const counted = { applies: 0 };
      const runner = createProjectionRunner(log, {
        name: 'rows',
        types: ['row.saved'],
        checkpoint: async () => (await store.checkpoint())?.position ?? 0,
        apply: (event) => {
          counted.applies += 1;
          const id = String(event.data['id']);
          return store.apply(event, id, (d) => doc(id, (d?.n ?? 0) + 1));
        },
      });
      await runner.start();
      await runner.waitFor(await log.headPosition());
      return { stores, store, runner, counted };
    };
    try {
      await append(250);
      const first = await run();
      expect(first.counted.applies).to.equal(250);
      await first.runner.stop();
      await first.stores.close();

      const second = await run();
      expect(second.counted.applies, 'no rebuild').to.equal(0);
      expect(await second.store.checkpoint()).to.include({ position: 250 });
      await append(5);
      await second.runner.waitFor(await log.headPosition());
      expect(second.counted.applies).to.equal(5);
      const page = await second.store.list({ partition: 'w1', newestFirst: false, page: 1, pageSize: 20 });
      expect(page.total).to.equal(10);
      expect(page.items.reduce((sum, row) => sum + row.n, 0)).to.equal(255);
      await second.runner.stop();
    } finally {
      await log.close();
    }
  });

  it('reads its writes before they are committed, and keeps documents and checkpoint together through a reopen', async () => {
    const file = newFile();
    const stores = open(file, 1_000_000);
    const store = stores.open(ROWS);
    await store.checkpoint();
    store.apply(ref(1), 'a', () => doc('a', 1));
    store.apply(ref(2), 'a', (d) => d && { ...d, n: 2 });
    // Synchronous: nothing was committed yet, and the same connection reads the document.
    expect(await store.get('a')).to.deep.equal(doc('a', 2));
    expect((await store.list({ partition: 'w1', newestFirst: true, page: 1, pageSize: 5 })).items).to.deep.equal([doc('a', 2)]);
    await stores.close();
    const again = open(file).open(ROWS);
    expect(await again.checkpoint()).to.deep.equal(ref(2));
    expect(await again.get('a')).to.deep.equal(doc('a', 2));
  });

  it('after a kill -9 mid-batch, holds exactly the events up to its checkpoint, copied into the file by the checkpointer thread, and resumes from there', async function () {
    this.timeout(60_000);
    const file = newFile();
    const child = fileURLToPath(new URL('./fixtures/sqlite-store-killed.ts', import.meta.url));
    const runChild = (events: number, killAt: number) =>
      spawnSync(process.execPath, ['--import', 'tsx', child, file, String(events), String(killAt), '150'], { encoding: 'utf8', timeout: 30_000 });
    /** Every document holds the events up to the checkpoint that touch it, each once, in order. */
    const expectConsistent = async (target = file): Promise<number> => {
      const stores = open(target);
      const store = stores.open(ROWS);
      const at = (await store.checkpoint())?.position ?? 0;
      const docs = await store.dump();
      for (let k = 0; k < 7; k++) {
        const expected = Array.from({ length: at }, (_, i) => i + 1).filter((p) => p % 7 === k);
        expect(docs.get(`d${k}`)?.applied ?? '', `d${k} at checkpoint ${at}`).to.equal(expected.map((p) => `,${p}`).join(''));
      }
      await stores.close();
      return at;
    };

    const killed = runChild(2_000, 1_234);
    expect(killed.signal, killed.stderr).to.equal('SIGKILL');
    // The database file alone, without its WAL, holds what the checkpointer copied: every commit before the kill.
    const fileAlone = newFile();
    copyFileSync(file, fileAlone);
    expect(await expectConsistent(fileAlone)).to.equal(1_233);
    // Everything committed before the kill, not the transaction it cut.
    expect(await expectConsistent()).to.equal(1_233);

    const finished = runChild(2_000, 0);
    expect(finished.status, finished.stderr).to.equal(0);
    expect(await expectConsistent()).to.equal(2_000);
  });

  it('keeps one table per projection version, and drops the lower versions when a new one opens', async () => {
    const file = newFile();
    const stores = open(file);
    const v1 = stores.open(ROWS);
    await v1.checkpoint();
    v1.apply(ref(1), 'a', () => doc('a', 1));
    const v2 = stores.open({ ...ROWS, version: 2 });
    expect(await v2.checkpoint()).to.equal(null);
    expect(await v2.get('a')).to.equal(undefined);
    v2.apply(ref(1), 'a', () => doc('a', 2));
    expect((await v1.get('a'))?.n, 'version 1 is still open here').to.equal(1);
    await stores.close();
    const reopened = open(file);
    expect(await reopened.open({ ...ROWS, version: 2 }).checkpoint()).to.deep.equal(ref(1));
    expect(await reopened.open(ROWS).checkpoint(), 'version 1 was dropped').to.equal(null);
  });

  it('rolls every store back to its last commit when a write fails, and has the runners resume from there', async () => {
    const stores = open(newFile(), 1_000_000);
    let resumed = 0;
    stores.onReconnect(() => (resumed += 1));
    const rows = stores.open(ROWS);
    const other = stores.open({ ...ROWS, name: 'other-rows' });
    await Promise.all([rows.checkpoint(), other.checkpoint()]);
    rows.apply(ref(1), 'a', () => doc('a', 1));
    stores.commit();
    rows.apply(ref(2), 'b', () => doc('b', 2));
    other.apply(ref(3), 'c', () => doc('c', 3));
    // A write SQLite refuses (here a document without a partition) stands for a full disk or an I/O error.
    expect(() => rows.apply(ref(4), 'd', () => doc('d', 4, { ws: undefined as unknown as string }))).to.throw(ProjectionReset);
    expect(stores.available()).to.equal(false);
    expect(() => other.apply(ref(5), 'e', () => doc('e', 5)), 'bound before the rollback').to.throw(ProjectionReset);
    await new Promise((resolve) => setImmediate(resolve));
    expect(resumed).to.equal(1);
    // Refused for a moment (the runners retry once a second), then the committed state.
    let refused: unknown = null;
    await rows.checkpoint().catch((error: unknown) => (refused = error));
    expect(refused).to.be.instanceOf(StoreUnavailable);
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    expect(await rows.checkpoint()).to.deep.equal(ref(1));
    expect(await other.checkpoint()).to.equal(null);
    expect(stores.available()).to.equal(true);
    expect([...(await rows.dump()).keys()]).to.deep.equal(['a']);
    expect((await other.dump()).size).to.equal(0);
  });

  it('answers a read after a rollback with the committed document, not the write rolled back', async () => {
    const stores = open(newFile(), 1_000_000);
    const rows = stores.open(ROWS);
    await rows.checkpoint();
    rows.apply(ref(1), 'a', () => doc('a', 1));
    stores.commit();
    rows.apply(ref(2), 'a', (d) => d && { ...d, n: 2 });
    rows.apply(ref(3), 'b', () => doc('b', 3));
    expect(await rows.get('a')).to.deep.equal(doc('a', 2));
    expect(() => rows.apply(ref(4), 'd', () => doc('d', 4, { ws: undefined as unknown as string }))).to.throw(ProjectionReset);
    expect(await rows.get('a')).to.deep.equal(doc('a', 1));
    expect(await rows.get('b')).to.equal(undefined);
    await stores.close();
  });

  it('rebuilds a store whose filter fields changed without a version bump', async () => {
    const file = await fileWithOneDocument();
    const changed = open(file).open({ ...ROWS, filters: ['status'] });
    expect(await changed.checkpoint()).to.equal(null);
    expect((await changed.dump()).size).to.equal(0);
  });

  it('refuses a file of another application, a file that is not a database, and a file in use', async () => {
    const foreign = newFile();
    const db = new Database(foreign);
    db.exec('CREATE TABLE precious (x)');
    db.close();
    expect(() => open(foreign)).to.throw(ReadModelsUnavailable, /another application/);
    const garbage = newFile();
    writeFileSync(garbage, 'not a database at all, but long enough to have a header of sorts..........................................');
    expect(() => open(garbage)).to.throw(ReadModelsUnavailable, /corrupt or foreign/);
    const busy = newFile();
    const first = open(busy);
    first.open(ROWS);
    expect(() => open(busy)).to.throw(ReadModelsUnavailable, /in use/);
  });

  it('empties a file of its own at another schema version', async () => {
    const file = await fileWithOneDocument();
    const db = new Database(file);
    db.pragma('user_version = 99');
    db.close();
    const again = open(file).open(ROWS);
    expect(await again.checkpoint()).to.equal(null);
  });
});
