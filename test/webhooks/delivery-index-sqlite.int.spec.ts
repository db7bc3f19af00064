// The delivery-history index in SQLite (the embedded mode): the contract, with the file opened again as
// a restart does, and what only a file has: a reader on a second connection, another version, the
// previous version taken forward in place, a foreign file.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { DELIVERY_INDEX_VERSION, type DeliveryIndex } from '../../projections/deliveries-index.js';
import { COMMIT_AFTER_MS, DeliveryIndexUnavailable, openSqliteDeliveryHistory, openSqliteDeliveryIndex } from '../../projections/deliveries-index-sqlite.js';
import { packSteps } from '../../src/domain/delivery/delivery.js';
import { deliveryIndexContract } from './delivery-index.contract.js';

const tempFile = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'delivery-index-'));
  return { file: path.join(dir, 'delivery-history.sqlite'), remove: () => rmSync(dir, { recursive: true, force: true }) };
};

deliveryIndexContract('sqlite', async () => {
  const { file, remove } = tempFile();
  const opened: DeliveryIndex[] = [openSqliteDeliveryIndex({ file })];
  return {
    index: opened[0] as DeliveryIndex,
    async reopen() {
      await opened.at(-1)?.close();
      const index = openSqliteDeliveryIndex({ file });
      opened.push(index);
      return index;
    },
    async teardown() {
      for (const index of opened) await index.close();
      remove();
    },
  };
});

describe('delivery history index file (int)', () => {
  let temp: ReturnType<typeof tempFile>;
  beforeEach(() => {
    temp = tempFile();
  });
  afterEach(() => temp.remove());

  const scheduled = (position: number, subscription = 's1') => ({
    id: `e${position}`,
    position,
    revision: position - 1,
    stream: `deliveries-${subscription}`,
    workspaceId: 'ws',
    ...packSteps([
      {
        type: 'delivery.scheduled',
        data: { delivery_id: `d${position}`, subscription_id: subscription, event_id: `x${position}`, event_type: 'ticket.created', event_position: position, fanned_out_through: 0, scheduled_at: 1_000 + position },
      },
    ]),
  });

  it("forgets a long history a batch a commit, the thread free between: a reader sees it shrink, and another subscription's record lands meanwhile", async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    const reader = new Database(temp.file, { readonly: true });
    const count = reader.prepare('SELECT count(*) FROM deliveries WHERE sub = ?').pluck();
    try {
      for (let position = 1; position <= 5_000; position++) writer.apply(scheduled(position));
      writer.commit();
      const forgetting = writer.forget('s1');
      let ended = false;
      void forgetting.then(() => (ended = true));
      const seen = new Set<number>();
      let landedMeanwhile = false;
      while (!ended) {
        const left = count.get('s1') as number;
        seen.add(left);
        if (left > 0 && left < 5_000 && !landedMeanwhile) {
          writer.apply(scheduled(5_001, 's2'));
          writer.commit();
          landedMeanwhile = count.get('s2') === 1 && !ended;
        }
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
      await forgetting;
      expect(count.get('s1')).to.equal(0);
      expect([...seen].filter((left) => left > 0 && left < 5_000), 'counts seen part way').to.not.be.empty;
      expect(landedMeanwhile, "another subscription's record committed while the forget went on").to.equal(true);
    } finally {
      reader.close();
      await writer.close();
    }
  });

  it('serves a reader on another connection what the writer committed, while the writer goes on', async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    const reader = openSqliteDeliveryHistory({ file: temp.file });
    try {
      writer.apply(scheduled(1));
      // Not committed yet: the reader sees the last commit only.
      expect((await reader.page({ subscriptionId: 's1', limit: 10 })).items).to.deep.equal([]);
      // Committed once the transaction has waited its time for more writes.
      await new Promise((resolve) => setTimeout(resolve, COMMIT_AFTER_MS + 20));
      writer.apply(scheduled(2));
      expect((await reader.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => d.id)).to.deep.equal(['d1']);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it("hands a reader on another connection what waits as of the writer's last commit, rows and fan-out checkpoint together", async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    const reader = openSqliteDeliveryHistory({ file: temp.file });
    const fannedOut = (position: number) => {
      const event = scheduled(position);
      const [step] = (event.data as { steps: { data: Record<string, unknown> }[] }).steps;
      step!.data['fanned_out_through'] = position;
      return event;
    };
    try {
      writer.apply(fannedOut(1));
      expect(await reader.pending()).to.deep.equal({ deliveries: [], fannedOutThrough: 0 });
      writer.commit();
      writer.apply(fannedOut(2));
      const committed = await reader.pending();
      expect(committed.fannedOutThrough).to.equal(1);
      expect(committed.deliveries.map((p) => [p.delivery.id, p.delivery.status, p.workspaceId])).to.deep.equal([['d1', 'waiting', 'ws']]);
      writer.commit();
      expect((await reader.pending()).deliveries.map((p) => p.delivery.id).sort()).to.deep.equal(['d1', 'd2']);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it('hands a restart what waits a page at a time: what pending() hands at once, without one settled between pages, with one changed but waiting', async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    const reader = openSqliteDeliveryHistory({ file: temp.file });
    const attempted = (position: number, deliveryId: string, delivered: boolean) => ({
      id: `e${position}`,
      position,
      revision: position - 1,
      stream: 'deliveries-s1',
      workspaceId: 'ws',
      ...packSteps([
        {
          type: 'delivery.attempted',
          data: { delivery_id: deliveryId, round: 1, attempt: 1, delivered, status_code: delivered ? 200 : 503, error: null, latency_ms: 3, attempted_at: 2_000, next_attempt_at: delivered ? null : 9_000 },
        },
      ]),
    });
    const ids = async (deliveries: AsyncIterable<{ readonly delivery: { readonly id: string } }>): Promise<string[]> => {
      const seen: string[] = [];
      for await (const { delivery } of deliveries) seen.push(delivery.id);
      return seen;
    };
    try {
      for (let position = 1; position <= 25; position++) {
        const event = scheduled(position);
        // The fan-out checkpoint ends at 20: the deliveries of 21 to 25 are past it, settled or not.
        (event.data as { steps: { data: Record<string, unknown> }[] }).steps[0]!.data['fanned_out_through'] = Math.min(position, 20);
        writer.apply(event);
      }
      writer.apply(attempted(26, 'd3', true));
      writer.apply(attempted(27, 'd22', true));
      writer.commit();
      const atOnce = await reader.pending();
      for (const pageSize of [1, 4, 23, 100]) {
        const paged = await reader.pendingPages(pageSize);
        expect(paged.fannedOutThrough).to.equal(atOnce.fannedOutThrough);
        const got = await ids(paged.deliveries);
        expect(got, `pages of ${pageSize}`).to.have.length(new Set(got).size);
        expect([...got].sort(), `pages of ${pageSize}`).to.deep.equal(atOnce.deliveries.map((d) => d.delivery.id).sort());
      }
      // Between two pages: d15 is delivered and d16 fails an attempt (it waits on, its row in place).
      const paged = (await reader.pendingPages(4)).deliveries[Symbol.asyncIterator]();
      const first: string[] = [];
      for (let n = 0; n < 5; n++) first.push(((await paged.next()).value as { delivery: { id: string } }).delivery.id);
      writer.apply(attempted(28, 'd15', true));
      writer.apply(attempted(29, 'd16', false));
      writer.commit();
      const rest = await ids({ [Symbol.asyncIterator]: () => paged });
      const all = [...first, ...rest];
      expect(all).to.not.include('d15');
      expect(all.filter((id) => id === 'd16')).to.have.length(1);
      expect(all).to.have.length(new Set(all).size);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it('writes a delivery changed twice before a commit in its last state, seen at once by the writer and after the commit by a reader', async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    const reader = openSqliteDeliveryHistory({ file: temp.file });
    try {
      writer.apply(scheduled(1));
      writer.apply({
        id: 'e2',
        position: 2,
        revision: 1,
        stream: 'deliveries-s1',
        workspaceId: 'ws',
        ...packSteps([
          {
            type: 'delivery.attempted',
            data: { delivery_id: 'd1', round: 1, attempt: 1, delivered: true, status_code: 200, error: null, latency_ms: 3, attempted_at: 2_000, next_attempt_at: null },
          },
        ]),
      });
      expect((await writer.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => d.status)).to.deep.equal(['delivered']);
      expect((await reader.page({ subscriptionId: 's1', limit: 10 })).items).to.deep.equal([]);
      await new Promise((resolve) => setTimeout(resolve, COMMIT_AFTER_MS + 20));
      expect((await reader.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => [d.id, d.status, d.history.length])).to.deep.equal([['d1', 'delivered', 1]]);
      expect((await reader.get('s1', 'd1'))?.position).to.equal(2);
    } finally {
      await reader.close();
      await writer.close();
    }
  });

  it('empties a file of another version, so that it is rebuilt from the log', async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    writer.apply(scheduled(1));
    await writer.close();
    const db = new Database(temp.file);
    db.pragma(`user_version = ${DELIVERY_INDEX_VERSION + 1}`);
    db.close();
    const reopened = openSqliteDeliveryIndex({ file: temp.file });
    try {
      expect(await reopened.checkpoint()).to.deep.equal({ position: 0, fannedOutThrough: 0 });
      expect((await reopened.page({ subscriptionId: 's1', limit: 10 })).items).to.deep.equal([]);
    } finally {
      await reopened.close();
    }
  });

  it("takes a file of the previous version (2: no stream records) forward in place, keeping its rows and checkpoint", async () => {
    const writer = openSqliteDeliveryIndex({ file: temp.file });
    writer.apply(scheduled(1));
    writer.apply(scheduled(2, 's2'));
    await writer.close();
    // Version 2's file is this one without `streams`.
    const db = new Database(temp.file);
    db.exec('DROP TABLE streams');
    db.pragma('user_version = 2');
    db.close();
    const reader = openSqliteDeliveryHistory({ file: temp.file });
    const reopened = openSqliteDeliveryIndex({ file: temp.file });
    try {
      expect(await reopened.checkpoint()).to.deep.equal({ position: 2, fannedOutThrough: 0 });
      expect((await reopened.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => d.id)).to.deep.equal(['d1']);
      // Nothing known of the streams yet: a dispatcher reads them from their first record.
      expect(await reader.waitingOf('s1')).to.deep.equal({ deliveries: [], workspaceId: null, revision: -1, position: 0 });
      expect(await reopened.appliedOf('s1')).to.deep.equal({ revision: -1, waiting: 1 });
      // The next record of a stream brings its entry, with the rows that already reflect every record before it.
      reopened.apply(scheduled(3));
      reopened.commit();
      const seed = await reader.waitingOf('s1');
      expect({ ...seed, deliveries: seed.deliveries.map((d) => d.id).sort() }).to.deep.equal({ deliveries: ['d1', 'd3'], workspaceId: 'ws', revision: 2, position: 3 });
      expect(await reader.appliedOf('s2')).to.deep.equal({ revision: -1, waiting: 1 });
    } finally {
      await reader.close();
      await reopened.close();
    }
    const after = new Database(temp.file);
    expect(after.pragma('user_version', { simple: true })).to.equal(DELIVERY_INDEX_VERSION);
    after.close();
  });

  it("refuses another application's database, writing nothing to it", () => {
    const db = new Database(temp.file);
    db.exec('CREATE TABLE theirs (x)');
    db.close();
    expect(() => openSqliteDeliveryIndex({ file: temp.file })).to.throw(DeliveryIndexUnavailable, /another application/);
    expect(() => openSqliteDeliveryHistory({ file: temp.file })).to.throw(DeliveryIndexUnavailable, /another application/);
    const after = new Database(temp.file);
    expect(after.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()).to.deep.equal(['theirs']);
    after.close();
  });
});
