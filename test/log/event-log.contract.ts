// The EventLog contract: every adapter of src/log/event-log.ts passes this one suite.
//
// Plug an adapter in with one line in its spec file:
//
//   eventLogContract('sqlite', async ({ clock }) => {
//     const log = openSqliteLog({ file: join(dir, `${randomUUID()}.db`), clock });
//     return { log, teardown: () => log.close() };
//   });
//
// The factory runs before each test. It receives the clock the adapter's offset sequencer must read
// (the suite moves it) and returns the log plus a teardown run after the test. The log may already
// hold events (a shared server): tests use fresh stream and workspace names and read from the head
// position they saw at their start. Offsets may be assigned after append returns (a sequencer apart
// from the writer): feed assertions wait until the events are sequenced.
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { MicrosClock } from '../../src/log/clock.js';
import {
  WrongExpectedRevision,
  type EventLog,
  type FeedQuery,
  type JsonObject,
  type NewEvent,
  type RecordedEvent,
} from '../../src/log/event-log.js';

export interface EventLogFixture {
  readonly log: EventLog;
  teardown(): Promise<void>;
}

export type EventLogFactory = (context: { readonly clock: MicrosClock }) => Promise<EventLogFixture>;

const hex = (bytes: number): string => randomBytes(bytes).toString('hex');
const unique = (prefix: string): string => `${prefix}-${hex(6)}`;

const event = (workspaceId: string, type = 'message.created', data: JsonObject = { n: 0 }, metadata?: JsonObject): NewEvent => ({
  id: hex(16),
  type,
  workspaceId,
  data,
  ...(metadata === undefined ? {} : { metadata }),
});

const events = (workspaceId: string, count: number, type = 'message.created'): NewEvent[] =>
  Array.from({ length: count }, (_, n) => event(workspaceId, type, { n }));

const ids = (list: readonly { readonly id: string }[]): string[] => list.map((e) => e.id);

const rejection = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
};

/** Polls until `done` holds (adapters whose sequencer runs apart from the writer need a moment). */
const eventually = async <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> => {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** Collects a subscription's deliveries; `reach(n)` resolves once n have arrived. */
const collector = () => {
  const seen: RecordedEvent[] = [];
  const waiting: { count: number; resolve: () => void }[] = [];
  return {
    seen,
    handler: (recorded: RecordedEvent) => {
      seen.push(recorded);
      waiting.filter((w) => seen.length >= w.count).forEach((w) => w.resolve());
    },
    reach: (count: number) =>
      seen.length >= count ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ count, resolve })),
  };
};

export const eventLogContract = (name: string, factory: EventLogFactory): void => {
  describe(`EventLog contract: ${name}`, () => {
    let now = 0;
    const clock: MicrosClock = () => now;
    let fixture: EventLogFixture;
    let log: EventLog;
    let ws: string;
    let start: number;

    beforeEach(async () => {
      now = Math.floor(Date.now() * 1000);
      fixture = await factory({ clock });
      log = fixture.log;
      ws = unique('ws');
      start = await log.headPosition();
    });

    afterEach(async () => {
      await fixture.teardown();
    });

    /** Appends and waits until the call's public events are in the feed, so the clock can move on. */
    const appendSequenced = async (stream: string, list: readonly NewEvent[]): Promise<RecordedEvent[]> => {
      const { records } = await log.append(stream, list, 'any');
      const wanted = new Set(ids(list));
      const workspaceId = (list[0] as NewEvent).workspaceId;
      const feed = await eventually(
        () => log.readFeed({ workspaceId, fromOffset: 0, limit: 1000 }),
        (items) => ids(items).filter((id) => wanted.has(id)).length === wanted.size,
        'the events to be sequenced',
      );
      return records.map((record) => feed.find((item) => item.id === record.id) as RecordedEvent);
    };

    const feed = (query: Partial<FeedQuery> = {}): Promise<RecordedEvent[]> =>
      log.readFeed({ workspaceId: ws, fromOffset: 0, limit: 1000, ...query });

    describe('append and read', () => {
      it('records events with 0-based revisions and increasing positions, and reads them back', async () => {
        const stream = unique('ticket');
        const first = event(ws, 'ticket.created', { subject: 'Ünïcode ✓', nested: { list: [1, 2.5, null, true, 'x'] } }, { actor: 'op-1' });
        const second = event(ws);
        const result = await log.append(stream, [first, second], 'no_stream');

        expect(result.nextRevision).to.equal(1);
        expect(result.records.map((r) => r.revision)).to.deep.equal([0, 1]);
        const [a, b] = result.records as [RecordedEvent, RecordedEvent];
        expect(a.position).to.be.greaterThan(start);
        expect(b.position).to.be.greaterThan(a.position);

        const read = await log.readStream(stream);
        expect(read.map((r) => ({ ...r, offset: null }))).to.deep.equal(result.records.map((r) => ({ ...r, offset: null })));
        expect(read[0]).to.include({ id: first.id, type: 'ticket.created', workspaceId: ws, stream, revision: 0 });
        expect(read[0]?.data).to.deep.equal(first.data);
        expect(read[0]?.metadata).to.deep.equal({ actor: 'op-1' });
        expect(read[1]?.metadata).to.deep.equal({});
      });

      it('reads a stream from a revision, and a missing stream as empty', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 4), 'any');
        expect((await log.readStream(stream, 2)).map((r) => r.revision)).to.deep.equal([2, 3]);
        expect(await log.readStream(unique('missing'))).to.deep.equal([]);
      });

      it("tells a stream's last revision, null for a missing or deleted stream", async () => {
        const stream = unique('ticket');
        expect(await log.lastRevision(stream)).to.equal(null);
        await log.append(stream, events(ws, 3), 'no_stream');
        expect(await log.lastRevision(stream)).to.equal(2);
        await log.append(stream, events(ws, 2), 2);
        expect(await log.lastRevision(stream)).to.equal(4);
        await log.deleteStream(stream);
        expect(await log.lastRevision(stream)).to.equal(null);
        // A stream written again after its deletion numbers from 0 again, as its reads do.
        await log.append(stream, events(ws, 1), 'any');
        expect(await log.lastRevision(stream)).to.equal((await log.readStream(stream)).at(-1)?.revision);
      });
    });

    describe('expected revision', () => {
      it('no_stream holds for a new stream only', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 1), 'no_stream');
        const error = await rejection(log.append(stream, events(ws, 1), 'no_stream'));
        expect(error).to.be.instanceOf(WrongExpectedRevision);
        expect(error).to.include({ stream, expected: 'no_stream', actual: 0 });
        expect(await log.readStream(stream)).to.have.length(1);
      });

      it('an exact revision must be the last one', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 2), 'no_stream');
        const result = await log.append(stream, events(ws, 1), 1);
        expect(result.nextRevision).to.equal(2);
        expect(result.records[0]?.revision).to.equal(2);

        const stale = await rejection(log.append(stream, events(ws, 1), 1));
        expect(stale).to.be.instanceOf(WrongExpectedRevision);
        expect(stale).to.include({ expected: 1, actual: 2 });
        const ahead = await rejection(log.append(stream, events(ws, 1), 7));
        expect(ahead).to.be.instanceOf(WrongExpectedRevision);
        expect(await log.readStream(stream)).to.have.length(3);
      });

      it('an exact revision on a missing stream fails with actual no_stream', async () => {
        const error = await rejection(log.append(unique('ticket'), events(ws, 1), 0));
        expect(error).to.be.instanceOf(WrongExpectedRevision);
        expect(error).to.include({ expected: 0, actual: 'no_stream' });
      });

      it('any appends whatever the stream holds', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 1), 'any');
        const result = await log.append(stream, events(ws, 2), 'any');
        expect(result.nextRevision).to.equal(2);
      });

      it('parallel appends with the same expected revision: exactly one wins', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 1), 'no_stream');
        const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => log.append(stream, events(ws, 1), 0)));
        const won = outcomes.filter((o) => o.status === 'fulfilled');
        const lost = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
        expect(won).to.have.length(1);
        lost.forEach((o) => expect(o.reason).to.be.instanceOf(WrongExpectedRevision));
        expect(await log.readStream(stream)).to.have.length(2);
      });

      it('parallel creations of one stream: exactly one wins', async () => {
        const stream = unique('ticket');
        const outcomes = await Promise.allSettled(Array.from({ length: 8 }, () => log.append(stream, events(ws, 2), 'no_stream')));
        expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length(1);
        expect(await log.readStream(stream)).to.have.length(2);
      });

      it('a failing call in a concurrent burst rejects alone', async () => {
        const [s1, s2, s3] = [unique('a'), unique('b'), unique('c')];
        await log.append(s2, events(ws, 1), 'no_stream');
        const outcomes = await Promise.allSettled([
          log.append(s1, events(ws, 1), 'any'),
          log.append(s2, events(ws, 1), 5),
          log.append(s3, events(ws, 2), 'no_stream'),
        ]);
        expect(outcomes.map((o) => o.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
        expect((await log.readStream(s1)).length).to.equal(1);
        expect((await log.readStream(s2)).length).to.equal(1);
        expect((await log.readStream(s3)).length).to.equal(2);
      });
    });

    describe('idempotence', () => {
      it('re-appending known events returns the stored records without checking expected', async () => {
        const stream = unique('ticket');
        const list = events(ws, 2);
        const first = await log.append(stream, list, 'no_stream');
        const again = await log.append(stream, list, 'no_stream');
        expect(again.records.map((r) => [r.id, r.revision, r.position])).to.deep.equal(
          first.records.map((r) => [r.id, r.revision, r.position]),
        );
        expect(again.nextRevision).to.equal(1);
        expect(await log.readStream(stream)).to.have.length(2);
        expect(await log.readAll({ after: start, workspaceId: ws })).to.have.length(2);
      });

      it('a retry racing the original still stores the events once', async () => {
        const stream = unique('ticket');
        const list = events(ws, 3);
        const outcomes = await Promise.allSettled([log.append(stream, list, 'no_stream'), log.append(stream, list, 'no_stream')]);
        expect(outcomes.filter((o) => o.status === 'fulfilled')).to.have.length.at.least(1);
        expect(ids(await log.readStream(stream))).to.deep.equal(ids(list));
      });
    });

    describe('reading everything', () => {
      it('orders the whole log by position, each stream in revision order', async () => {
        const streams = Array.from({ length: 6 }, () => unique('ticket'));
        const appended = (
          await Promise.all(
            streams.map(async (stream) => {
              const records: RecordedEvent[] = [];
              for (let i = 0; i < 4; i += 1) records.push(...(await log.append(stream, events(ws, 2), 'any')).records);
              return records;
            }),
          )
        ).flat();

        const all = await log.readAll({ after: start, workspaceId: ws });
        expect(all).to.have.length(appended.length);
        all.slice(1).forEach((r, i) => expect(r.position).to.be.greaterThan((all[i] as RecordedEvent).position));
        for (const stream of streams) {
          expect(all.filter((r) => r.stream === stream).map((r) => r.revision)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
        }
        const positionOf = new Map(appended.map((r) => [r.id, r.position]));
        all.forEach((r) => expect(r.position).to.equal(positionOf.get(r.id)));
      });

      it('cursors are exclusive, and pages join up to the whole read', async () => {
        const { records } = await log.append(unique('ticket'), events(ws, 7), 'any');
        const third = records[2] as RecordedEvent;
        const after = await log.readAll({ after: third.position, workspaceId: ws });
        expect(ids(after)).to.deep.equal(ids(records.slice(3)));

        const paged: RecordedEvent[] = [];
        let cursor = start;
        for (;;) {
          const page = await log.readAll({ after: cursor, limit: 3, workspaceId: ws });
          if (page.length === 0) break;
          paged.push(...page);
          cursor = (page.at(-1) as RecordedEvent).position;
        }
        expect(ids(paged)).to.deep.equal(ids(records));
        expect(await log.readAll({ after: (records.at(-1) as RecordedEvent).position, workspaceId: ws })).to.deep.equal([]);
      });

      it('filters by type and workspace, the limit counting matches only', async () => {
        const other = unique('ws');
        const stream = unique('ticket');
        await log.append(stream, [event(ws, 'ticket.created'), event(ws), event(other, 'ticket.created'), event(ws, 'ticket.closed'), event(ws, 'ticket.created')], 'any');

        const created = await log.readAll({ after: start, workspaceId: ws, types: ['ticket.created'] });
        expect(created.map((r) => [r.type, r.workspaceId])).to.deep.equal([['ticket.created', ws], ['ticket.created', ws]]);
        const either = await log.readAll({ after: start, workspaceId: ws, types: ['ticket.created', 'ticket.closed'], limit: 2 });
        expect(either.map((r) => r.type)).to.deep.equal(['ticket.created', 'ticket.closed']);
        const theirs = await log.readAll({ after: start, workspaceId: other });
        expect(theirs.map((r) => r.workspaceId)).to.deep.equal([other]);
        const byType = await log.readAll({ after: start, types: ['ticket.closed'] });
        expect(byType.map((r) => r.type)).to.deep.equal(['ticket.closed']);
      });

      it('pages of several types, across workspaces, come in log order, each after the last', async () => {
        const [a, b, c] = [unique('type-a'), unique('type-b'), unique('type-c')];
        const other = unique('ws');
        const order = [a, b, c, a, a, b, c, c, a, b, 'message.created', a];
        const { records } = await log.append(unique('ticket'), order.map((type, n) => event(n % 3 === 0 ? other : ws, type, { n })), 'any');
        const wanted = ids(records.filter((r) => r.type === a || r.type === b));
        const paged: RecordedEvent[] = [];
        for (let cursor = start; ; ) {
          // A type named twice is read once.
          const page = await log.readAll({ after: cursor, limit: 3, types: [b, a, b] });
          expect(page.length).to.be.at.most(3);
          if (page.length === 0) break;
          paged.push(...page);
          cursor = (page.at(-1) as RecordedEvent).position;
        }
        expect(ids(paged)).to.deep.equal(wanted);
        expect(await log.readAll({ after: start, limit: 0, types: [a] })).to.deep.equal([]);
        expect(ids(await log.readAll({ after: start, types: [c] }))).to.deep.equal(ids(records.filter((r) => r.type === c)));
      });

      it('headPosition is the position of the last event', async () => {
        const { records } = await log.append(unique('ticket'), events(ws, 3), 'any');
        const head = await log.headPosition();
        expect(head).to.equal((records.at(-1) as RecordedEvent).position);
        expect(await log.readAll({ after: head })).to.deep.equal([]);
        const next = await log.append(unique('ticket'), events(ws, 1), 'any');
        expect(await log.headPosition()).to.equal(next.records[0]?.position);
      });
    });

    describe('subscribe', () => {
      it('catches up, then delivers live events, in order, once each', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 5), 'any');
        const got = collector();
        const subscription = log.subscribe({ after: start, workspaceId: ws }, got.handler);
        await got.reach(5);
        const live = await log.append(stream, events(ws, 3), 'any');
        await got.reach(8);
        await subscription.stop();
        await subscription.done;
        expect(got.seen.map((r) => r.revision)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
        expect(ids(got.seen.slice(5))).to.deep.equal(ids(live.records));
      });

      it('delivers events appended while it catches up', async () => {
        const stream = unique('ticket');
        await log.append(stream, events(ws, 40), 'any');
        const got = collector();
        let appendedDuringCatchUp = false;
        const subscription = log.subscribe({ after: start, workspaceId: ws }, async (recorded) => {
          got.handler(recorded);
          if (!appendedDuringCatchUp) {
            appendedDuringCatchUp = true;
            await log.append(stream, events(ws, 10), 'any');
          }
        });
        void log.append(unique('ticket'), events(ws, 5), 'any');
        await got.reach(55);
        await log.append(stream, events(ws, 2), 'any');
        await got.reach(57);
        await subscription.stop();
        expect(got.seen).to.have.length(57);
        expect(new Set(ids(got.seen)).size).to.equal(57);
        got.seen.slice(1).forEach((r, i) => expect(r.position).to.be.greaterThan((got.seen[i] as RecordedEvent).position));
      });

      it('awaits the handler: one event at a time', async () => {
        await log.append(unique('ticket'), events(ws, 6), 'any');
        let running = 0;
        let overlapped = false;
        const got = collector();
        const subscription = log.subscribe({ after: start, workspaceId: ws }, async (recorded) => {
          running += 1;
          overlapped ||= running > 1;
          await new Promise((resolve) => setTimeout(resolve, 2));
          running -= 1;
          got.handler(recorded);
        });
        await got.reach(6);
        await subscription.stop();
        expect(overlapped).to.equal(false);
      });

      it('applies the filters, and starts after the given position', async () => {
        const { records } = await log.append(unique('ticket'), [event(ws, 'ticket.created'), event(ws), event(ws, 'ticket.created'), event(unique('ws'), 'ticket.created')], 'any');
        const got = collector();
        const subscription = log.subscribe({ after: (records[0] as RecordedEvent).position, workspaceId: ws, types: ['ticket.created'] }, got.handler);
        await got.reach(1);
        const live = await log.append(unique('ticket'), [event(ws), event(ws, 'ticket.created')], 'any');
        await got.reach(2);
        await subscription.stop();
        expect(ids(got.seen)).to.deep.equal([records[2]?.id, live.records[1]?.id]);
      });

      it('tells the positions it looked through past filtered events, once the matching ones before them are handled (where it reports them)', async function () {
        if (log.reportsScanned !== true) this.skip();
        const handled: number[] = [];
        const told: { position: number; handledThen: number }[] = [];
        const head = await log.headPosition();
        const subscription = log.subscribe(
          { after: head, types: ['ticket.created'], scanned: (position) => void told.push({ position, handledThen: handled.length }) },
          async (recorded) => {
            // A slow handler: the position past it must not be told before it is done.
            await new Promise((resolve) => setTimeout(resolve, 5));
            handled.push(recorded.position);
          },
        );
        const { records } = await log.append(unique('ticket'), [event(ws, 'ticket.created'), event(ws), event(ws)], 'any');
        const last = (records[2] as RecordedEvent).position;
        for (let waited = 0; !told.some((t) => t.position >= last) && waited < 200; waited++) await new Promise((resolve) => setTimeout(resolve, 10));
        await subscription.stop();
        const past = told.find((t) => t.position >= last);
        expect(past, 'a position at or past the last filtered event').to.not.equal(undefined);
        expect(past?.handledThen, 'the matching event before it was handled first').to.equal(1);
        expect(handled).to.deep.equal([records[0]?.position]);
        told.slice(1).forEach((t, i) => expect(t.position).to.be.greaterThan((told[i] as { position: number }).position));
      });

      it('stop() ends delivery and resolves done', async () => {
        const got = collector();
        const subscription = log.subscribe({ after: start, workspaceId: ws }, got.handler);
        await log.append(unique('ticket'), events(ws, 1), 'any');
        await got.reach(1);
        await subscription.stop();
        await subscription.done;

        await log.append(unique('ticket'), events(ws, 1), 'any');
        const witness = collector();
        const second = log.subscribe({ after: start, workspaceId: ws }, witness.handler);
        await witness.reach(2);
        await second.stop();
        expect(got.seen).to.have.length(1);
      });

      it('a throwing handler rejects done', async () => {
        await log.append(unique('ticket'), events(ws, 3), 'any');
        let calls = 0;
        const subscription = log.subscribe({ after: start, workspaceId: ws }, () => {
          calls += 1;
          throw new Error('handler broke');
        });
        const error = await rejection(subscription.done);
        expect((error as Error).message).to.equal('handler broke');
        expect(calls).to.equal(1);
        await subscription.stop();
      });
    });

    describe('deleteStream', () => {
      it('removes the stream from every read, and leaves the others', async () => {
        const doomed = unique('webhook');
        const kept = unique('ticket');
        await log.append(doomed, events(ws, 3), 'any');
        const keptRecords = (await log.append(kept, events(ws, 2), 'any')).records;
        await eventually(() => feed(), (items) => items.length === 5, 'the events to be sequenced');

        await log.deleteStream(doomed);
        expect(await log.readStream(doomed)).to.deep.equal([]);
        expect(ids(await log.readAll({ after: start, workspaceId: ws }))).to.deep.equal(ids(keptRecords));
        expect(ids(await feed())).to.deep.equal(ids(keptRecords));
        const got = collector();
        const subscription = log.subscribe({ after: start, workspaceId: ws }, got.handler);
        await got.reach(2);
        const marker = await log.append(kept, events(ws, 1), 'any');
        await got.reach(3);
        await subscription.stop();
        expect(ids(got.seen)).to.deep.equal(ids([...keptRecords, ...marker.records]));
      });

      it('after the streams at the end of the log are deleted, the head is the last event that remains and readers go on from it', async () => {
        const kept = (await log.append(unique('ticket'), events(ws, 2), 'any')).records;
        const doomed = [unique('webhook'), unique('deliveries')];
        let deletedUpTo = 0;
        for (const stream of doomed) deletedUpTo = (await log.append(stream, events(ws, 3), 'any')).records.at(-1)?.position ?? 0;
        for (const stream of doomed) await log.deleteStream(stream);

        const head = await log.headPosition();
        expect(head).to.equal((kept.at(-1) as RecordedEvent).position);
        expect(await log.readAll({ after: head })).to.deep.equal([]);
        expect(ids(await log.readAll({ after: start, workspaceId: ws }))).to.deep.equal(ids(kept));
        const got = collector();
        const subscription = log.subscribe({ after: head }, got.handler);
        const next = await log.append(unique('ticket'), events(ws, 1), 'any');
        await got.reach(1);
        await subscription.stop();
        expect(ids(got.seen)).to.deep.equal(ids(next.records));
        expect(next.records[0]?.position, 'positions of the deleted events are not reused').to.be.greaterThan(deletedUpTo);
        expect(await log.headPosition()).to.equal(next.records[0]?.position);
      });

      it('deleting a missing stream is a no-op', async () => {
        await log.deleteStream(unique('missing'));
        const { records } = await log.append(unique('ticket'), events(ws, 1), 'any');
        expect(ids(await log.readAll({ after: start, workspaceId: ws }))).to.deep.equal(ids(records));
      });
    });

    describe('watchFeed', () => {
      interface Announcement {
        readonly workspaceId: string;
        readonly offset: number;
        /** Whether readFeed returned the announced event when the handler ran. */
        readonly readable: boolean;
      }

      /** Collects the announcements of `workspaces` (a shared server announces others too). */
      const announcements = (workspaces: readonly string[]) => {
        const got: Announcement[] = [];
        const waiting: { count: number; resolve: () => void }[] = [];
        return {
          got,
          handler: async (workspaceId: string, offset: number): Promise<void> => {
            if (!workspaces.includes(workspaceId)) return;
            const [first] = await log.readFeed({ workspaceId, fromOffset: offset, limit: 1 });
            got.push({ workspaceId, offset, readable: first?.offset === offset });
            waiting.filter((w) => got.length >= w.count).forEach((w) => w.resolve());
          },
          reach: (count: number) =>
            got.length >= count ? Promise.resolve() : new Promise<void>((resolve) => waiting.push({ count, resolve })),
        };
      };

      it('announces each public event appended after it started, once readFeed returns it, in offset order', async () => {
        const other = unique('ws');
        // Already in the feed when the watch starts: not announced.
        await appendSequenced(unique('ticket'), [event(ws, 'ticket.created')]);
        const watched = announcements([ws, other]);
        const watch = await log.watchFeed(watched.handler);
        const stream = unique('ticket');
        const first = await log.append(stream, [event(ws, 'ticket.created'), event(ws, 'apikey.issued'), event(other, 'ticket.created')], 'any');
        const second = await log.append(stream, [event(ws), event(ws, 'ticket.closed')], 'any');
        await watched.reach(4);

        const later = new Set(ids([...first.records, ...second.records]));
        const mine = (await feed()).filter((item) => later.has(item.id));
        const theirs = await feed({ workspaceId: other });
        expect(mine).to.have.length(3);
        expect(watched.got.filter((a) => a.workspaceId === ws).map((a) => a.offset)).to.deep.equal(mine.map((r) => r.offset));
        expect(watched.got.filter((a) => a.workspaceId === other).map((a) => a.offset)).to.deep.equal(theirs.map((r) => r.offset));
        expect(watched.got.every((a) => a.readable)).to.equal(true);
        await watch.stop();
        await watch.done;
      });

      it('stop() ends the announcements', async () => {
        const watched = announcements([ws]);
        const watch = await log.watchFeed(watched.handler);
        await log.append(unique('ticket'), [event(ws, 'ticket.created')], 'any');
        await watched.reach(1);
        await watch.stop();
        await watch.done;

        const witness = announcements([ws]);
        const second = await log.watchFeed(witness.handler);
        await log.append(unique('ticket'), [event(ws, 'ticket.created')], 'any');
        await witness.reach(1);
        await second.stop();
        expect(watched.got).to.have.length(1);
      });
    });

    describe('feed by offset', () => {
      it('offsets equal the clock when it moves forwards', async () => {
        const [first] = await appendSequenced(unique('ticket'), [event(ws, 'ticket.created')]);
        expect(first?.offset).to.equal(now);
        now += 1_500_000;
        const [second] = await appendSequenced(unique('ticket'), [event(ws)]);
        expect(second?.offset).to.equal(now);
      });

      it('offsets are max(clock, previous + 1) when the clock stalls or goes backwards', async () => {
        const base = now;
        const stalled = await appendSequenced(unique('ticket'), events(ws, 3));
        expect(stalled.map((r) => r.offset)).to.deep.equal([base, base + 1, base + 2]);
        now = base - 5_000_000;
        const [behind] = await appendSequenced(unique('ticket'), [event(ws)]);
        expect(behind?.offset).to.equal(base + 3);
        now = base + 10;
        const [ahead] = await appendSequenced(unique('ticket'), [event(ws)]);
        expect(ahead?.offset).to.equal(base + 10);
      });

      it('offsets strictly increase in log order under concurrent appends', async () => {
        await Promise.all(Array.from({ length: 10 }, () => log.append(unique('ticket'), events(ws, 3), 'any')));
        const items = await eventually(() => feed(), (list) => list.length === 30, 'the events to be sequenced');
        const offsets = items.map((r) => r.offset as number);
        offsets.slice(1).forEach((offset, i) => expect(offset).to.be.greaterThan(offsets[i] as number));
        items.slice(1).forEach((r, i) => expect(r.position).to.be.greaterThan((items[i] as RecordedEvent).position));
      });

      it('fromOffset is inclusive; types and limit filter the feed', async () => {
        const list = await appendSequenced(unique('ticket'), [event(ws, 'ticket.created'), event(ws), event(ws, 'ticket.closed'), event(ws)]);
        const [, second, third] = list as [RecordedEvent, RecordedEvent, RecordedEvent, RecordedEvent];
        expect(ids(await feed({ fromOffset: second.offset as number }))).to.deep.equal(ids(list.slice(1)));
        expect(ids(await feed({ fromOffset: (second.offset as number) + 1 }))).to.deep.equal(ids(list.slice(2)));
        expect(ids(await feed({ types: ['ticket.created', 'ticket.closed'] }))).to.deep.equal(ids([list[0] as RecordedEvent, third]));
        expect(ids(await feed({ limit: 2 }))).to.deep.equal(ids(list.slice(0, 2)));
        expect(await feed({ fromOffset: (list.at(-1)?.offset as number) + 1 })).to.deep.equal([]);
      });

      it('internal events are in the log but never in the feed', async () => {
        const stream = unique('apikey');
        const { records } = await log.append(stream, [event(ws, 'apikey.issued'), event(ws, 'ticket.created')], 'any');
        const items = await eventually(() => feed(), (list) => list.length === 1, 'the public event to be sequenced');
        expect(ids(items)).to.deep.equal([records[1]?.id]);
        const all = await log.readAll({ after: start, workspaceId: ws });
        expect(all.map((r) => [r.type, r.offset])).to.deep.include(['apikey.issued', null]);
      });

      it('each workspace has its own feed and its own offsets', async () => {
        const other = unique('ws');
        const base = now;
        const mine = await appendSequenced(unique('ticket'), events(ws, 3));
        const theirs = await appendSequenced(unique('ticket'), events(other, 1));
        expect(mine.map((r) => r.offset)).to.deep.equal([base, base + 1, base + 2]);
        expect(theirs.map((r) => r.offset)).to.deep.equal([base]);
        expect(ids(await feed())).to.deep.equal(ids(mine));
        expect(ids(await feed({ workspaceId: other }))).to.deep.equal(ids(theirs));
      });
    });
  });
};
