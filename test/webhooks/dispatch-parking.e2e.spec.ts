// The embedded service's delivery thread parks a dead receiver's retries in its parking lot
// (DATA_DIR/webhook-parked.sqlite) instead of holding them, a restart parks them again from the
// delivery history index a page at a time, and once the receiver answers each retry goes out once.
// The backlog counts the parked ones.
import { expect } from 'chai';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { PARKING_FILE } from '../../src/webhooks/dispatch/parking.js';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { startTestService, type TestService } from '../support/server.js';
import { emit, eventually, header, subscribe } from '../support/webhooks-dispatch.js';

const EVENTS = 20;
/**
 * Over the 10 s horizon: each retry is parked when its first attempt fails, and again by a restart
 * that reads it more than 10 s before it is due (a restart on a loaded machine takes seconds).
 */
const RETRY_S = 25;

describe('webhook delivery: parked retries in the embedded service (e2e)', function () {
  this.timeout(60_000);
  let test: TestService | undefined;
  let receiver: Receiver | undefined;
  let dataDir: string;

  beforeEach(() => {
    dataDir = mkdtempSync(path.join(tmpdir(), 'sp-parking-'));
  });

  afterEach(async () => {
    await test?.close();
    await receiver?.close();
    test = undefined;
    rmSync(dataDir, { recursive: true, force: true });
  });

  /** Rows in the delivery thread's lot, read on a connection of the test's own. */
  const parkedRows = (): number => {
    const db = new Database(path.join(dataDir, PARKING_FILE), { readonly: true, fileMustExist: true });
    try {
      return (db.prepare('SELECT count(*) AS n FROM parked').get() as { n: number }).n;
    } finally {
      db.close();
    }
  };
  const waiting = async (): Promise<number> => Number((await (test as TestService).admin('GET', '/admin/v1/webhooks/backlog')).body['waiting']);

  it('parks them, parks them again after a restart, and sends each once when due', async () => {
    const env = { WEBHOOK_RETRY_DELAYS: `${RETRY_S}s,${RETRY_S}s,${RETRY_S}s,${RETRY_S}s,${RETRY_S}s` };
    test = await startTestService(env, { dataDir });
    receiver = await startReceiver();
    receiver.respond({ kind: 'status', status: 503 });
    const ws = await test.createWorkspace();
    await subscribe(ws, receiver.url);
    for (let n = 0; n < EVENTS; n++) await emit(test, ws.workspaceId);
    const firsts = await receiver.waitForRequests(EVENTS);
    const failed = new Set(firsts.map((r) => header(r, 'x-webhook-id')));
    await eventually('every retry parked', () => parkedRows() === EVENTS);
    expect(await waiting()).to.equal(EVENTS);

    await test.close();
    // Answered from now on, so the retries succeed whenever the restarted service sends them.
    receiver.respond({ kind: 'status', status: 200 });
    test = await startTestService(env, { dataDir });
    expect(await waiting()).to.equal(EVENTS);
    await eventually('parked again by the restart', () => parkedRows() === EVENTS);
    // Parked by the restart's read, not after another attempt (whose retry a lot would park too).
    expect(receiver.requests, 'no retry sent before its due time').to.have.length(EVENTS);

    const all = await receiver.waitForRequests(2 * EVENTS);
    const retries = all.slice(EVENTS);
    expect(retries.map((r) => header(r, 'x-webhook-attempt'))).to.deep.equal(Array<string>(EVENTS).fill('2'));
    expect(new Set(retries.map((r) => header(r, 'x-webhook-id')))).to.deep.equal(failed);
    await eventually('nothing left waiting', async () => (await waiting()) === 0);
    expect(parkedRows()).to.equal(0);
    expect(receiver.requests).to.have.length(2 * EVENTS);
  });
});
