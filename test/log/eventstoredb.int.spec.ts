// The EventStoreDB adapter against a real server: EVENTSTORE_URL, e.g.
//   EVENTSTORE_URL='esdb://localhost:2113?tls=false' npx mocha test/log/eventstoredb.int.spec.ts
// Without it every test here is reported pending. A server keeps its data between runs, so each run
// uses a namespace (stream prefix) of its own.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { MicrosClock } from '../../src/log/clock.js';
import type { EventLog, NewEvent, RecordedEvent } from '../../src/log/event-log.js';
import { openEventStoreDbLog } from '../../src/log/eventstoredb.js';
import type { EventStoreDbLogOptions } from '../../src/log/eventstoredb.js';
import { eventLogContract } from './event-log.contract.js';

const url = process.env['EVENTSTORE_URL'];
const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const unique = (prefix: string): string => `${prefix}-${hex(6)}`;

const SPECIFIC = [
  'a sequencer started later indexes what was appended while none ran, once each, offsets increasing',
  'two sequencers at once index every event exactly once',
  'a deleted stream written again starts at revision 0 and its old events stay gone from $all',
  'a process without the sequencer appends, and sees the feed once the sequencer has indexed',
];

if (url === undefined) {
  describe('EventStoreDB event log (set EVENTSTORE_URL to run)', () => {
    it('passes the EventLog contract suite');
    SPECIFIC.forEach((title) => it(title));
  });
} else {
  const namespace = `${unique('t')}-`;
  const open = (options: Partial<EventStoreDbLogOptions> = {}): Promise<EventLog> =>
    openEventStoreDbLog({ connectionString: url, namespace, ...options });

  eventLogContract('eventstoredb', async ({ clock }) => {
    const log = await open({ sequencer: true, clock });
    return { log, teardown: () => log.close() };
  });

  const newEvents = (workspaceId: string, count: number, type = 'message.created'): NewEvent[] =>
    Array.from({ length: count }, (_, n) => ({ id: hex(16), type, workspaceId, data: { n } }));

  const waitForFeed = async (log: EventLog, workspaceId: string, count: number): Promise<RecordedEvent[]> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const items = await log.readFeed({ workspaceId, fromOffset: 0, limit: 1000 });
      if (items.length >= count || Date.now() > deadline) return items;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };

  const expectStrictlyIncreasing = (values: readonly number[]): void =>
    values.slice(1).forEach((value, i) => expect(value).to.be.greaterThan(values[i] as number));

  describe('EventStoreDB event log', () => {
    const opened: EventLog[] = [];
    const track = async (log: Promise<EventLog>): Promise<EventLog> => {
      opened.push(await log);
      return opened.at(-1) as EventLog;
    };
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((log) => log.close()));
    });

    it(SPECIFIC[0] as string, async () => {
      const ws = unique('ws');
      const first = await track(open({ sequencer: true }));
      const before = await first.append(unique('ticket'), newEvents(ws, 3), 'no_stream');
      expect(await waitForFeed(first, ws, 3)).to.have.length(3);
      await first.close();
      opened.splice(0);

      const writer = await track(open());
      const meanwhile = await writer.append(unique('ticket'), newEvents(ws, 4), 'no_stream');
      const later = await track(open({ sequencer: true }));
      const items = await waitForFeed(later, ws, 7);
      expect(items.map((r) => r.id)).to.deep.equal([...before.records, ...meanwhile.records].map((r) => r.id));
      expectStrictlyIncreasing(items.map((r) => r.offset as number));
    });

    it(SPECIFIC[1] as string, async () => {
      const ws = unique('ws');
      // A frozen clock: every offset comes from previous + 1, the case where interleaving would show.
      const frozen = Math.floor(Date.now() * 1000);
      const clock: MicrosClock = () => frozen;
      const [a] = await Promise.all([track(open({ sequencer: true, clock })), track(open({ sequencer: true, clock }))]);
      const appended = (
        await Promise.all(Array.from({ length: 8 }, () => (a as EventLog).append(unique('ticket'), newEvents(ws, 3), 'any')))
      ).flatMap((result) => result.records);
      const items = await waitForFeed(a as EventLog, ws, appended.length);
      expect(items).to.have.length(appended.length);
      expect(new Set(items.map((r) => r.id)).size).to.equal(appended.length);
      expectStrictlyIncreasing(items.map((r) => r.offset as number));
      expectStrictlyIncreasing(items.map((r) => r.position));
    });

    it(SPECIFIC[2] as string, async () => {
      const ws = unique('ws');
      const log = await track(open());
      const start = await log.headPosition();
      const stream = unique('webhook');
      await log.append(stream, newEvents(ws, 3), 'no_stream');
      await log.deleteStream(stream);
      expect(await log.readStream(stream)).to.deep.equal([]);

      const again = await log.append(stream, newEvents(ws, 2), 'no_stream');
      expect(again.records.map((r) => r.revision)).to.deep.equal([0, 1]);
      expect(again.nextRevision).to.equal(1);
      expect((await log.readStream(stream)).map((r) => r.id)).to.deep.equal(again.records.map((r) => r.id));
      expect((await log.readStream(stream, 1)).map((r) => r.revision)).to.deep.equal([1]);
      expect((await log.readAll({ after: start, workspaceId: ws })).map((r) => [r.id, r.revision])).to.deep.equal(
        again.records.map((r) => [r.id, r.revision]),
      );
      const stale = await log.append(stream, newEvents(ws, 1), 0).catch((error: unknown) => error);
      expect(stale).to.include({ name: 'WrongExpectedRevision', actual: 1 });
    });

    it(SPECIFIC[3] as string, async () => {
      const ws = unique('ws');
      const sequencer = await track(open({ sequencer: true }));
      const writer = await track(open());
      const { records } = await writer.append(unique('ticket'), newEvents(ws, 2, 'ticket.created'), 'no_stream');
      expect(records.map((r) => r.offset)).to.deep.equal([null, null]);
      expect(await waitForFeed(sequencer, ws, 2)).to.have.length(2);
      const seen = await waitForFeed(writer, ws, 2);
      expect(seen.map((r) => r.id)).to.deep.equal(records.map((r) => r.id));
      expect(seen.every((r) => typeof r.offset === 'number')).to.equal(true);
    });
  });
}
