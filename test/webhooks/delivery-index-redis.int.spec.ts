// The delivery-history index in Redis (the distributed mode): the contract, with the index opened again
// as a restarting process does, and what only a shared copy has: several writers applying the same
// log, a Redis that lost its data, a Redis that does not answer. Pending unless REDIS_URL is set.
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProjectionReset } from '../../src/app/projection-runner.js';
import { deliveryAggregate, packSteps, type Delivery, type DeliveryCommand } from '../../src/domain/delivery/delivery.js';
import { deliveryStream } from '../../src/domain/delivery/ids.js';
import { DELIVERY_INDEX_VERSION, type DeliveryIndex } from '../../projections/deliveries-index.js';
import { LINGER_MS, openRedisDeliveryIndex } from '../../projections/deliveries-index-redis.js';
import { StoreUnavailable, type ProjectedEvent } from '../../projections/tickets-store.js';
import { deliveryLog } from '../support/delivery-steps.js';
import { redisServerInstalled, startPrivateRedis } from '../support/redis-server.js';
import { eventually } from '../support/webhooks-dispatch.js';
import { deliveryIndexContract } from './delivery-index.contract.js';

const redisUrl = process.env['REDIS_URL'];

/**
 * A fresh namespace on the test Redis; every index opened on it is closed, its keys dropped, at
 * teardown. Its applies are not gathered unless asked (`lingerMs`): most tests apply an event at a time.
 */
const namespace = (url: string) => {
  const keyPrefix = `test:${Math.random().toString(16).slice(2)}:`;
  const opened: DeliveryIndex[] = [];
  const open = async ({ pendingPage, lingerMs = 0 }: { pendingPage?: number; lingerMs?: number } = {}): Promise<ReturnType<typeof openRedisDeliveryIndex>> => {
    const index = openRedisDeliveryIndex({ url, keyPrefix, lingerMs, ...(pendingPage === undefined ? {} : { pendingPage }) });
    opened.push(index);
    // Bound to the stored data, as its runner does before the first apply.
    await index.checkpoint();
    return index;
  };
  /** What a Redis restarted without persistence leaves of this index: nothing. */
  const lose = async () => {
    const admin = new Redis(url);
    try {
      const keys = await admin.keys(`{${keyPrefix}dh:*`);
      if (keys.length > 0) await admin.del(...keys);
    } finally {
      admin.disconnect();
    }
  };
  return {
    keyPrefix,
    open,
    lose,
    async teardown() {
      await lose();
      for (const index of opened) await index.close();
    },
  };
};

if (redisUrl !== undefined) {
  deliveryIndexContract('redis', async () => {
    const space = namespace(redisUrl);
    return { index: await space.open(), reopen: () => space.open(), teardown: space.teardown };
  });
}

const T0 = 1_700_000_000_000_000;

/** The log of one subscription's deliveries, as a dispatcher records them: each scheduled, then (unless told) delivered at its first attempt. */
const deliveryRecords = (count: number, attempted = true): ProjectedEvent[] => {
  const decided = (command: DeliveryCommand, state: Delivery | null) => {
    const result = deliveryAggregate.decide(command, state);
    if (result._tag === 'Left') throw new Error(result.left.message);
    return result.right;
  };
  return Array.from({ length: count }, (_, i) => {
    const deliveryId = `d${String(i).padStart(3, '0')}`;
    const schedule = { kind: 'schedule', deliveryId, subscriptionId: 's1', eventId: `x${i}`, eventType: 'ticket.created', eventPosition: i + 1, fannedOutThrough: i, at: T0 + i } as const;
    const scheduled = decided(schedule, null);
    const state = scheduled.reduce(deliveryAggregate.evolve, null);
    const outcome = { delivered: true, statusCode: 200, error: null, latencyMs: 3 };
    return attempted ? [scheduled, decided({ kind: 'record_attempt', attempt: 1, outcome, at: T0 + i + 1, retryDelaysMs: [] }, state)] : [scheduled];
  })
    .flat()
    .map((steps, i) => ({ id: `e${i}`, position: i + 1, revision: i, stream: deliveryStream('s1'), workspaceId: 'ws', ...packSteps(steps) }));
};

type Index = ReturnType<typeof openRedisDeliveryIndex>;

/** Hands `seen` each reply of one of the index's scripts on its client. */
const onScript = (index: Index, script: 'historyRead' | 'historyApply' | 'historyPendingPage' | 'historyForget', seen: (reply: unknown) => unknown): void => {
  const client = index.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const call = (client[script] as (...args: unknown[]) => Promise<unknown>).bind(index.client);
  client[script] = async (...args: unknown[]) => {
    const reply = await call(...args);
    // Awaited: what it looks at after the script is seen before the caller goes on.
    await seen(reply);
    return reply;
  };
};

(redisUrl === undefined ? describe.skip : describe)('delivery history index in Redis (int)', () => {
  let space: ReturnType<typeof namespace>;
  beforeEach(() => {
    space = namespace(redisUrl as string);
  });
  afterEach(() => space.teardown());

  it('ends the same when two writers apply the same log at once, each event applied once', async () => {
    const events = deliveryRecords(150);
    const [a, b] = [await space.open(), await space.open()];
    // Both race through the whole log; the second one mostly finds its events applied by the first.
    await Promise.all([Promise.all(events.map((event) => a.apply(event))), Promise.all(events.map((event) => b.apply(event)))]);
    const page = await a.page({ subscriptionId: 's1', limit: 200 });
    expect(page.items).to.have.length(150);
    expect(page.items.every((d) => d.status === 'delivered' && d.history.length === 1)).to.equal(true);
    expect(page.items[0]?.id).to.equal('d149');
    expect(await b.checkpoint()).to.deep.equal({ position: 300, fannedOutThrough: 149 });
    // The last one's event is past the fan-out checkpoint: a replayed fan-out must find it known.
    expect((await b.pending()).deliveries.map((p) => p.delivery.id)).to.deep.equal(['d149']);
  });

  it('hands a restart what waits a page at a time: each once, as one read of it all does, however many', async () => {
    const events = deliveryRecords(2_500, false);
    const writer = await space.open();
    for (let i = 0; i < events.length; i += 250) await Promise.all(events.slice(i, i + 250).map((event) => writer.apply(event)));
    const paged = await space.open({ pendingPage: 100 });
    let pages = 0;
    onScript(paged, 'historyPendingPage', () => (pages += 1));
    const [byPages, whole] = [await paged.pending(), await (await space.open({ pendingPage: 1_000_000 })).pending()];
    const ids = (pending: typeof whole) => pending.deliveries.map((p) => p.delivery.id).sort();
    expect(pages, 'read in pages').to.be.greaterThan(10);
    expect(ids(byPages)).to.have.length(2_500);
    expect(new Set(ids(byPages)).size, 'each once').to.equal(2_500);
    expect(ids(byPages)).to.deep.equal(ids(whole));
    expect(byPages.fannedOutThrough).to.equal(whole.fannedOutThrough);
    const last = byPages.deliveries.find((p) => p.delivery.id === 'd2499');
    expect(last).to.deep.include({ workspaceId: 'ws' });
    expect(last?.delivery).to.include({ status: 'waiting', eventPosition: 2_500 });
  });

  it('refuses a restart read whose Redis lost the index between two of its pages', async () => {
    const events = deliveryRecords(600, false);
    const writer = await space.open();
    await Promise.all(events.map((event) => writer.apply(event)));
    const paged = await space.open({ pendingPage: 100 });
    // The data goes (Redis restarted without persistence) once the first page is read.
    const client = paged.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const page = (client['historyPendingPage'] as (...args: unknown[]) => Promise<unknown>).bind(paged.client);
    let pages = 0;
    client['historyPendingPage'] = async (...args: unknown[]) => {
      const reply = await page(...args);
      if ((pages += 1) === 1) await space.lose();
      return reply;
    };
    let failure: unknown = null;
    await paged.pending().catch((error: unknown) => (failure = error));
    expect(pages).to.equal(2);
    expect(failure).to.be.instanceOf(ProjectionReset);
  });

  it('reads no delivery back for a batch another writer applied already', async () => {
    const events = deliveryRecords(50);
    const [a, b] = [await space.open(), await space.open()];
    await Promise.all(events.map((event) => a.apply(event)));
    // What b's reads bring back: the status and the two checkpoints, then one JSON (or null) per delivery asked.
    const replies: number[] = [];
    onScript(b, 'historyRead', (reply) => replies.push((reply as unknown[]).length));
    await Promise.all(events.map((event) => b.apply(event)));
    expect(replies.length, 'reads by the second writer').to.be.greaterThan(0);
    expect(replies, 'deliveries read back').to.satisfy((lengths: number[]) => lengths.every((n) => n === 3));
    expect(await b.checkpoint()).to.deep.equal({ position: 100, fannedOutThrough: 49 });
    expect((await b.page({ subscriptionId: 's1', limit: 100 })).items).to.have.length(50);
  });

  /** Counts the applies a writer sends (each carries its batch's deliveries), refused ('moved') or not. */
  const countApplies = (index: Index) => {
    const sent = { applies: 0, moved: 0 };
    onScript(index, 'historyApply', (outcome) => {
      sent.applies += 1;
      if (outcome === 'moved') sent.moved += 1;
    });
    return sent;
  };

  /** Counts the looks a writer deferred (answered 'defer': another writer applied within the last second). */
  const countDefers = (index: Index) => {
    const deferred = { looks: 0 };
    onScript(index, 'historyRead', (reply) => {
      if ((reply as unknown[])[0] === 'defer') deferred.looks += 1;
    });
    return deferred;
  };

  it('leaves a batch to the writer that applied last: two writers tailing one log send each batch once', async () => {
    const events = deliveryRecords(200);
    const [a, b] = [await space.open(), await space.open()];
    const [sentA, sentB] = [countApplies(a), countApplies(b)];
    await a.apply(events[0] as ProjectedEvent);
    // Both read each commit at the same moment, as two dispatchers tailing the log do.
    for (let start = 1; start < events.length; start += 25) {
      const commit = events.slice(start, start + 25);
      await Promise.all([Promise.all(commit.map((event) => a.apply(event))), Promise.all(commit.map((event) => b.apply(event)))]);
    }
    // Without the deferral (measured): 51-52 applies between them, 18-19 of them refused as 'moved'.
    // One stall of a past the ten looks may let b apply a batch (and then a defers to b): no more.
    expect(sentB.applies, 'batches the writer that did not apply last sent').to.be.at.most(2);
    expect(sentA.moved + sentB.moved, "applies refused as 'moved'").to.be.at.most(1);
    expect(await b.checkpoint()).to.deep.equal({ position: 400, fannedOutThrough: 199 });
    expect((await b.page({ subscriptionId: 's1', limit: 300 })).items).to.have.length(200);
  });

  it('applies a batch itself once the writer it left batches to has stopped applying', async () => {
    const events = deliveryRecords(20);
    const [a, b] = [await space.open(), await space.open()];
    for (const event of events.slice(0, 20)) await a.apply(event);
    const sentB = countApplies(b);
    const deferred = countDefers(b);
    // a is gone, though it applied within the second it counts as active: b looks ten times at most
    // (half that second), then applies.
    for (const event of events.slice(20)) await b.apply(event);
    expect(deferred.looks).to.be.at.most(10);
    expect(sentB.applies).to.be.greaterThan(0);
    expect(await a.checkpoint()).to.deep.equal({ position: 40, fannedOutThrough: 19 });
    // Now b applied last: a leaves batches to it.
    const sentA = countApplies(a);
    const more = deliveryRecords(30).slice(40);
    await Promise.all([Promise.all(more.map((event) => b.apply(event))), Promise.all(more.map((event) => a.apply(event)))]);
    expect(sentA.applies, 'batches a sent (one stall past its ten looks may let it send one)').to.be.at.most(1);
    expect(await a.checkpoint()).to.deep.equal({ position: 60, fannedOutThrough: 29 });
  });

  it('leases the writing to one writer at a time: renewed by its holder, taken by another once it runs out or is given back', async () => {
    const [a, b] = [await space.open(), await space.open()];
    expect(await a.lease(300)).to.equal(true);
    expect(await b.lease(300), 'b while a holds it').to.equal(false);
    expect(await a.lease(300), 'a renews it').to.equal(true);
    await b.release();
    expect(await b.lease(300), 'b giving back what it does not hold changes nothing').to.equal(false);
    await sleep(400);
    expect(await b.lease(300), 'b once a did not renew it in time').to.equal(true);
    expect(await a.lease(300), 'a, which let it run out').to.equal(false);
    await b.release();
    expect(await a.lease(60_000), 'a once b gave it back').to.equal(true);
    // A Redis that lost its data lost the lease too: whoever asks next holds it.
    await space.lose();
    expect(await b.lease(300)).to.equal(true);
  });

  it('refuses applies and a restart from it once Redis lost its data, and starts again from position 0', async () => {
    const index = await space.open();
    const events = deliveryRecords(3);
    for (const event of events.slice(0, 4)) await index.apply(event);
    await space.lose();
    let applyFailure: unknown = null;
    await Promise.resolve(index.apply(events[4] as ProjectedEvent)).catch((error: unknown) => (applyFailure = error));
    expect(applyFailure).to.be.instanceOf(ProjectionReset);
    // A dispatcher must not take over from an index that is being rebuilt.
    let pendingFailure: unknown = null;
    await index.pending().catch((error: unknown) => (pendingFailure = error));
    expect(pendingFailure).to.be.instanceOf(ProjectionReset);
    expect(await index.checkpoint()).to.deep.equal({ position: 0, fannedOutThrough: 0 });
    for (const event of events) await index.apply(event);
    expect((await index.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => d.id)).to.deep.equal(['d002', 'd001', 'd000']);
  });

  /** The writes the index's scripts make while `run` runs, as MONITOR reports them: command and key, the namespace cut off. */
  const scriptWrites = async (run: () => Promise<void> | void): Promise<string[]> => {
    const monitor = await new Redis(redisUrl as string).monitor();
    const admin = new Redis(redisUrl as string);
    const seen: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (source === 'lua' || args[0] === 'get') seen.push(args);
    });
    try {
      await run();
      // MONITOR reports behind the commands: once it reported a read sent after them, it reported them all.
      const marker = `${space.keyPrefix}marker`;
      await admin.get(marker);
      await eventually('the marker in the monitor', () => seen.some((args) => args[1] === marker));
    } finally {
      monitor.disconnect();
      admin.disconnect();
    }
    const tag = `{${space.keyPrefix}dh:v`;
    return seen
      .filter(([command, key]) => /^(zadd|zrem|sadd|srem|hset|hdel)$/i.test(command ?? '') && key?.startsWith(tag))
      .map(([command, key]) => `${command?.toUpperCase()} ${key?.slice(key.indexOf('}:') + 2)}`);
  };

  it('moves a stored delivery only between the sets of its status, and only when its status changed', async () => {
    const index = await space.open();
    const [scheduled, delivered] = deliveryRecords(1) as [ProjectedEvent, ProjectedEvent];
    expect(await scriptWrites(() => index.apply(scheduled)), 'a new delivery: in every set of its own').to.have.members([
      'ZADD s:s1',
      'ZADD s:s1:t:ticket.created',
      'HSET ws',
      'ZADD s:s1:st:waiting',
      'ZADD s:s1:st:waiting:t:ticket.created',
      'SADD waiting',
      'HSET docs',
      'ZADD ahead',
      'HSET streams',
      'HSET meta',
    ]);
    // Its subscription, event type, creation time and workspace are as they were: only its status moved.
    expect(await scriptWrites(() => index.apply(delivered)), 'the delivered attempt').to.have.members([
      'ZREM s:s1:st:waiting',
      'ZREM s:s1:st:waiting:t:ticket.created',
      'ZADD s:s1:st:delivered',
      'ZADD s:s1:st:delivered:t:ticket.created',
      'SREM waiting',
      'ZADD settled',
      'HSET docs',
      'HSET streams',
      'HSET meta',
    ]);
    expect((await index.page({ subscriptionId: 's1', status: 'delivered', eventType: 'ticket.created', limit: 10 })).items.map((d) => d.id)).to.deep.equal(['d000']);
    expect((await index.page({ subscriptionId: 's1', status: 'waiting', limit: 10 })).items).to.deep.equal([]);
  });

  it('writes a delivery scheduled and settled within a batch once, in its last state, and gathers a batch for a while', async () => {
    const index = await space.open({ lingerMs: LINGER_MS });
    const sent = countApplies(index);
    const [scheduled, delivered] = deliveryRecords(1) as [ProjectedEvent, ProjectedEvent];
    // The attempt's record comes 30 ms after the scheduling's, as a fast receiver's answer does.
    const writes = await scriptWrites(() => Promise.all([index.apply(scheduled), sleep(30).then(() => index.apply(delivered))]).then(() => undefined));
    expect(sent.applies, 'applies sent').to.equal(1);
    expect(writes, 'never waiting in the index: straight into the sets of its last status').to.have.members([
      'ZADD s:s1',
      'ZADD s:s1:t:ticket.created',
      'HSET ws',
      'ZADD s:s1:st:delivered',
      'ZADD s:s1:st:delivered:t:ticket.created',
      'ZADD settled',
      'HSET docs',
      'ZADD ahead',
      'HSET streams',
      'HSET meta',
    ]);
    expect((await index.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => [d.id, d.status, d.history.length])).to.deep.equal([['d000', 'delivered', 1]]);
    expect(await index.checkpoint()).to.deep.equal({ position: 2, fannedOutThrough: 0 });
  });

  it('splits a rebuild into applies of at most a thousand deliveries, whole records each', async () => {
    const index = await space.open({ lingerMs: LINGER_MS });
    const sent: number[] = [];
    const client = index.client as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const apply = (client['historyApply'] as (...args: unknown[]) => Promise<unknown>).bind(index.client);
    client['historyApply'] = async (...args: unknown[]) => {
      // Eleven arguments a delivery after the keys (8), the prefix, eight fixed and the streams' pairs (one stream: 2).
      sent.push((args.length - 8 - 1 - 8 - 2) / 11);
      return apply(...args);
    };
    // 30 records of 100 deliveries each, as a rebuild reads a burst's packed records.
    const records = Array.from({ length: 30 }, (_, r) => ({
      id: `e${r}`,
      position: r + 1,
      revision: r,
      stream: deliveryStream('s1'),
      workspaceId: 'ws',
      ...packSteps(
        Array.from({ length: 100 }, (_, i) => {
          const n = r * 100 + i;
          const decided = deliveryAggregate.decide({ kind: 'schedule', deliveryId: `d${n}`, subscriptionId: 's1', eventId: `x${n}`, eventType: 'ticket.created', eventPosition: n + 1, fannedOutThrough: n, at: T0 + n }, null);
          if (decided._tag === 'Left') throw new Error(decided.left.message);
          return decided.right;
        }).flat(),
      ),
    }));
    await Promise.all(records.map((record) => index.apply(record)));
    expect(sent, 'deliveries per apply').to.deep.equal([1_000, 1_000, 1_000]);
    expect(await index.checkpoint()).to.deep.equal({ position: 30, fannedOutThrough: 2_999 });
  });

  describe("a deleted subscription's long history", () => {
    let log = deliveryLog(T0);
    /** `count` deliveries of `sub` (numbered from `from`), scheduled and delivered, in packed records of 500 as a busy dispatcher writes them. */
    const history = (sub: string, count: number, from = 0): ProjectedEvent[] =>
      Array.from({ length: Math.ceil(count / 500) }, (_, r) =>
        log.record(sub, Array.from({ length: Math.min(500, count - r * 500) }, (_, i) => [...log.schedule(sub, `${sub}-${from + r * 500 + i}`, { fannedOutThrough: 1 }), ...log.attempt(`${sub}-${from + r * 500 + i}`, 'delivered')]).flat()),
      );
    /** Looks at the keys on a connection of its own (a writer's may be closed). */
    let admin: Redis;
    const key = (name: string) => `{${space.keyPrefix}dh:v${DELIVERY_INDEX_VERSION}}:${name}`;
    const count = async (sub: string): Promise<number> => admin.zcard(key(`s:${sub}`));
    const forgetting = async (): Promise<string[]> => admin.smembers(key('forgetting'));

    beforeEach(() => {
      log = deliveryLog(T0);
      admin = new Redis(redisUrl as string);
    });
    afterEach(() => admin.disconnect());

    it('goes after the apply that passes its marker, which another subscription\'s records do not wait for', async () => {
      const index = await space.open();
      for (const record of [...history('s1', 20_000), ...history('s2', 10)]) await index.apply(record);
      // The marker and another subscription's record in one apply: it moves the checkpoint past both at once.
      await Promise.all([index.apply(log.deleted('s1')), ...history('s3', 1).map((record) => index.apply(record))]);
      expect((await index.page({ subscriptionId: 's3', limit: 20 })).items, "another subscription's delivery").to.have.length(1);
      expect((await index.page({ subscriptionId: 's2', limit: 20 })).items).to.have.length(10);
      expect(await count('s1'), 'still being dropped').to.be.within(1, 19_000);
      expect(await forgetting()).to.deep.equal(['s1']);
      await eventually('s1 dropped', async () => (await count('s1')) === 0);
      expect(await forgetting()).to.deep.equal([]);
      expect((await index.page({ subscriptionId: 's1', limit: 10 })).items).to.deep.equal([]);
      expect(await index.get('s1', 's1-0')).to.equal(undefined);
    });

    it('leaves the set in the script that drops its last delivery, at an exact multiple of a script\'s batch too', async () => {
      const index = await space.open();
      // What each forget script left: the deliveries still indexed, and whether it is still marked.
      const seen: Array<[number, boolean]> = [];
      onScript(index, 'historyForget', async () => void seen.push([await count('s1'), (await forgetting()).includes('s1')]));
      // The apply that passes the marker drops a thousand, the forget scripts two thousand more.
      for (const record of history('s1', 3_000)) await index.apply(record);
      await index.apply(log.deleted('s1'));
      // Until a script has left none (what it left is noted after the script answered).
      await eventually('s1 dropped', async () => seen.some(([left]) => left === 0));
      expect(seen).to.deep.equal([[1_000, true], [0, false]]);
    });

    it('writes nothing more of it meanwhile, and goes on with the next writer when one stops part way', async () => {
      const first = await space.open();
      for (const record of history('s1', 20_000)) await first.apply(record);
      await first.apply(log.deleted('s1'));
      // A record of it a dispatcher wrote before it learnt of the deletion: not indexed.
      for (const stray of history('s1', 1, 50_000)) await first.apply(stray);
      expect(await first.get('s1', 's1-50000')).to.equal(undefined);
      await first.close();
      const left = await count('s1');
      expect(left, 'left by the writer that stopped').to.be.within(1, 19_000);
      const second = await space.open();
      expect(await forgetting()).to.deep.equal(['s1']);
      await eventually('s1 dropped by the next writer', async () => (await count('s1')) === 0);
      expect(await forgetting()).to.deep.equal([]);
      expect((await second.checkpoint()).position).to.equal(42);
    });
  });

  it('answers StoreUnavailable while Redis does not answer, and pages again once it does', async function () {
    if (!redisServerInstalled()) this.skip();
    const redis = await startPrivateRedis();
    const index = openRedisDeliveryIndex({ url: redis.url });
    try {
      await index.checkpoint();
      for (const event of deliveryRecords(2)) await index.apply(event);
      redis.pause();
      let failure: unknown = null;
      await index.page({ subscriptionId: 's1', limit: 10 }).catch((error: unknown) => (failure = error));
      expect(failure).to.be.instanceOf(StoreUnavailable);
      failure = null;
      await index.get('s1', 'd000').catch((error: unknown) => (failure = error));
      expect(failure).to.be.instanceOf(StoreUnavailable);
      redis.resume();
      expect((await index.page({ subscriptionId: 's1', limit: 10 })).items.map((d) => d.id)).to.deep.equal(['d001', 'd000']);
    } finally {
      redis.resume();
      await index.close();
      await redis.stop();
    }
  });
});
