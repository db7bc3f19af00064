// What a dispatcher with a delivery-history index reads of a subscription's waiting deliveries without
// reading them all, against each index adapter (Redis with REDIS_URL) on the real SQLite log, reading
// only the stream's records after what the index applied. A deactivation: pages of them, after those
// those records touch (delivery-now.ts `waitingNow`): every delivery the whole stream has waiting,
// once, as the stream has it, in pages no larger than asked. A replay pacing itself: its deliveries
// waiting for their first attempt (`replayFirstsNow`, the index's `replayFirsts`), as the whole stream has them.
import { expect } from 'chai';
import fc from 'fast-check';
import type { Delivery } from '../../src/domain/delivery/delivery.js';
import type { EventLog } from '../../src/log/event-log.js';
import { replayFirstsNow, waitingNow } from '../../src/webhooks/dispatch/delivery-now.js';
import type { DeliveryIndex } from '../../projections/deliveries-index.js';
import { appendHistory, deliveryRecords, historyRecords, INDEX_ADAPTERS, indexedLog, watched, wholeStream } from '../support/delivery-steps.js';

const sortedIds = (deliveries: readonly Delivery[]): string[] => deliveries.map((delivery) => delivery.id).sort();

/** Every page `waitingNow` yields. */
const pagesOf = async (index: DeliveryIndex, log: EventLog, size: number): Promise<(readonly Delivery[])[]> => {
  const pages: (readonly Delivery[])[] = [];
  for await (const page of waitingNow(index, log, 's', size)) pages.push(page);
  return pages;
};

for (const adapter of INDEX_ADAPTERS) {
  describe(`a subscription's waiting deliveries read a page at a time (${adapter} index, real SQLite log)`, () => {
    const world = indexedLog(adapter);

    it('pages through the index and reads only the records after what it applied', async () => {
      const records = deliveryRecords(world.log);
      for (let i = 0; i < 25; i++) await records.append([...records.schedule(`d${i}`), ...(i % 5 === 0 ? records.attempt(`d${i}`, 'delivered') : [])]);
      await world.feed.applyNext();
      // After what the index applied: one settled, one scheduled.
      await records.append(records.attempt('d3', 'delivered'));
      await records.append(records.schedule('late'));
      const reads = watched(world.log);
      const pages = await pagesOf(world.index, reads.log, 4);
      expect(reads.from.filter((from) => from < 25), 'no read from before what the index applied').to.deep.equal([]);
      expect(pages.every((page) => page.length <= 4)).to.equal(true);
      const ids = pages.flat().map((delivery) => delivery.id);
      const waiting = [...(await wholeStream(world.log)).values()].filter((delivery) => delivery.status === 'waiting').map((delivery) => delivery.id);
      expect(ids.slice().sort()).to.deep.equal(waiting.sort());
      expect(pages[0]?.map((delivery) => delivery.id), 'what only the later records hold comes first').to.deep.equal(['late']);
      expect(ids).to.not.include('d3');
      expect(pages.length, 'the index read in pages').to.be.greaterThan(4);
    });

    it('reads the records after what the index applied once, however many pages they fill (an index far behind)', async () => {
      const records = deliveryRecords(world.log);
      for (let i = 0; i < 30; i++) await records.append([...records.schedule(`d${i}`), ...(i % 3 === 0 ? records.attempt(`d${i}`, 'delivered') : [])]);
      await world.feed.applyNext(2);
      const reads = watched(world.log);
      const pages = await pagesOf(world.index, reads.log, 4);
      expect(reads.from, 'one read, from after what the index applied').to.deep.equal([2]);
      expect(pages.filter((page) => page.length > 0).length).to.be.greaterThan(4);
      const waiting = [...(await wholeStream(world.log)).values()].filter((delivery) => delivery.status === 'waiting');
      expect(sortedIds(pages.flat())).to.deep.equal(sortedIds(waiting));
    });

    it('yields every waiting delivery once, as the whole stream has it, whatever the index has applied (property)', async () => {
      const round = fc.record({ steps: historyRecords, indexed: fc.nat(8), size: fc.integer({ min: 1, max: 4 }) });
      await fc.assert(
        fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 5 }), async (rounds) => {
          await world.reset();
          const records = deliveryRecords(world.log);
          let scheduled = 0;
          for (const { steps, indexed, size } of rounds) {
            await appendHistory(records, steps, () => `d${(scheduled += 1)}`);
            await world.feed.applyNext(indexed);
            const pages = await pagesOf(world.index, world.log, size);
            expect(pages.every((page) => page.length <= size)).to.equal(true);
            const yielded = pages.flat();
            expect(new Set(yielded.map((delivery) => delivery.id)).size, 'each once').to.equal(yielded.length);
            const whole = await wholeStream(world.log);
            const waiting = [...whole.values()].filter((delivery) => delivery.status === 'waiting');
            expect(yielded.map((delivery) => delivery.id).sort()).to.deep.equal(waiting.map((delivery) => delivery.id).sort());
            for (const delivery of yielded) expect(delivery, delivery.id).to.deep.equal(whole.get(delivery.id));
          }
        }),
        { numRuns: 30 },
      );
    });

    it("gives a replay's deliveries waiting for their first attempt as the whole stream has them, whatever the index has applied (property)", async () => {
      // `racing`: records the index applies between its two reads (it keeps applying while asked).
      const round = fc.record({ steps: historyRecords, indexed: fc.nat(8), racing: fc.nat(4) });
      await fc.assert(
        fc.asyncProperty(fc.array(round, { minLength: 1, maxLength: 5 }), async (rounds) => {
          await world.reset();
          const records = deliveryRecords(world.log);
          // Every third delivery live, the others of two replays.
          const replayOf = (id: string): string | undefined => (Number(id.slice(1)) % 3 === 0 ? undefined : `r${Number(id.slice(1)) % 3}`);
          const mixed = { ...records, schedule: (id: string) => records.schedule(id, { ...(replayOf(id) === undefined ? {} : { replayId: replayOf(id) as string }) }) };
          let scheduled = 0;
          for (const { steps, indexed, racing } of rounds) {
            await appendHistory(mixed, steps, () => `d${(scheduled += 1)}`);
            await world.feed.applyNext(indexed);
            const whole = [...(await wholeStream(world.log)).values()];
            for (const replayId of ['r1', 'r2']) {
              const expected = whole.filter((d) => d.replayId === replayId && d.status === 'waiting' && d.round === 1 && d.attempt === 0);
              const applying = { ...world.index, replayFirsts: async (s: string, r: string) => (await world.feed.applyNext(racing), world.index.replayFirsts(s, r)) };
              expect(sortedIds(await replayFirstsNow(applying, world.log, 's', replayId)), replayId).to.deep.equal(sortedIds(expected));
            }
          }
          // All applied: the index's own answer, every one waiting never attempted (a manual retry of one cancelled before its first attempt too).
          await world.feed.applyNext();
          const whole = [...(await wholeStream(world.log)).values()];
          for (const replayId of ['r1', 'r2']) {
            const firsts = await world.index.replayFirsts('s', replayId);
            expect(sortedIds(firsts.deliveries)).to.deep.equal(sortedIds(whole.filter((d) => d.replayId === replayId && d.status === 'waiting' && d.history.length === 0)));
            for (const delivery of firsts.deliveries) expect(delivery).to.deep.equal(whole.find((d) => d.id === delivery.id));
          }
        }),
        { numRuns: 30 },
      );
    });
  });
}
