// The EventStoreDB adapter against a real server: EVENTSTORE_URL, e.g.
//   EVENTSTORE_URL='esdb://localhost:2113?tls=false' npx mocha test/log/eventstoredb.int.spec.ts
// Without it every test here is reported pending. A server keeps its data between runs, so each run
// uses a namespace (stream prefix) of its own.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, connect as connectTcp } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
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
  'subscribe, watchFeed and the sequencer resume after a lost connection, missing and repeating nothing',
];

/**
 * A TCP relay to the server whose connections the test cuts: the client sees what a network fault
 * or a server restart shows it (its gRPC calls fail with UNAVAILABLE), and the server stays up for
 * the reconnection. Needs a single-node, insecure URL (tls=false): the relay rewrites the host.
 */
const relayTo = async (serverUrl: string): Promise<{ readonly url: string; cut(): void; close(): Promise<void> } | null> => {
  const parsed = URL.canParse(serverUrl) ? new URL(serverUrl) : null;
  if (parsed === null || parsed.protocol !== 'esdb:' || parsed.searchParams.get('tls') !== 'false') return null;
  const sockets = new Set<Socket>();
  const keep = (socket: Socket): Socket => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket)).on('error', () => undefined);
    return socket;
  };
  const server = createServer((inbound) => {
    const outbound = keep(connectTcp(Number(parsed.port || 2113), parsed.hostname));
    keep(inbound).pipe(outbound).pipe(inbound);
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  const relayed = new URL(serverUrl);
  relayed.host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  const cut = (): void => sockets.forEach((socket) => socket.destroy());
  return {
    url: relayed.toString(),
    cut,
    close: async () => {
      const closed = once(server, 'close');
      server.close();
      cut();
      await closed;
    },
  };
};

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

  /** Polls until `done` holds or 20 s pass (the expectations that follow then fail). */
  const eventually = async (done: () => boolean): Promise<void> => {
    const deadline = Date.now() + 20_000;
    while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
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

    it(SPECIFIC[4] as string, async function () {
      this.timeout(60_000);
      const relay = await relayTo(url);
      if (relay === null) this.skip();
      const errors: unknown[] = [];
      // Everything of this log goes through the relay; the writer does not, so it writes while the
      // other is cut off.
      const log = await open({ connectionString: relay.url, sequencer: true, onError: (error) => errors.push(error) }).catch(async (error: unknown) => {
        await relay.close();
        throw error;
      });
      try {
        const ws = unique('ws');
        const writer = await track(open());
        const received: RecordedEvent[] = [];
        const subscription = log.subscribe({ after: await writer.headPosition(), workspaceId: ws }, (record) => {
          received.push(record);
        });
        const announced: number[] = [];
        const watch = await log.watchFeed((workspaceId, offset) => {
          if (workspaceId === ws) announced.push(offset);
        });
        let settled = false;
        void Promise.allSettled([subscription.done, watch.done]).then(() => (settled = true));

        const before = await writer.append(unique('ticket'), newEvents(ws, 3, 'ticket.created'), 'no_stream');
        await eventually(() => received.length >= 3 && announced.length >= 3);
        expect(announced).to.have.length(3);
        relay.cut();
        const during = await writer.append(unique('ticket'), newEvents(ws, 3, 'ticket.created'), 'no_stream');
        await eventually(() => received.length >= 6 && announced.length >= 6);

        expect(errors).to.not.be.empty;
        expect(settled).to.equal(false);
        const appended = [...before.records, ...during.records];
        expect(received.map((r) => r.id)).to.deep.equal(appended.map((r) => r.id));
        const feed = await waitForFeed(writer, ws, appended.length);
        expect(feed.map((r) => r.id)).to.deep.equal(appended.map((r) => r.id));
        expect(announced).to.deep.equal(feed.map((r) => r.offset));
        await subscription.stop();
        await watch.stop();
        await subscription.done;
        await watch.done;
      } finally {
        await log.close();
        await relay.close();
      }
    });
  });
}
