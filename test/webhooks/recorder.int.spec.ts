// The delivery recorder on a real SQLite log: what is recorded within one interval goes out as one
// packed event per stream, in order, one append at a time per stream; an urgent record (a first
// attempt a shared schedule may hand to another dispatcher waits on it) goes out at the next turn,
// with what else was recorded in that turn, not at the next interval; a failed append rejects the
// records of its batch alone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { Decided } from '../../src/domain/aggregate.js';
import { unpackSteps } from '../../src/domain/delivery/delivery.js';
import type { EventLog } from '../../src/log/event-log.js';
import { openSqliteLog } from '../../src/log/sqlite.js';
import { createRecorder } from '../../src/webhooks/dispatch/recorder.js';

const dir = mkdtempSync(join(tmpdir(), 'recorder-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const step = (deliveryId: string, attempt: number): Decided => ({ type: 'delivery.attempted', data: { delivery_id: deliveryId, round: 1, attempt } });

/** The steps of a stream as the log has them, and how many log events carry them. */
const logged = async (log: EventLog, stream: string) => {
  const events = await log.readStream(stream);
  return { events: events.length, steps: events.flatMap((e) => unpackSteps(e).map((s) => `${String(s.data['delivery_id'])}#${String(s.data['attempt'])}`)) };
};

describe('delivery recorder (int)', () => {
  let log: ReturnType<typeof openSqliteLog>;
  beforeEach(() => {
    log = openSqliteLog({ file: join(dir, `${Math.random().toString(36).slice(2)}.db`) });
  });
  afterEach(() => log.close());

  it('packs what one interval records into one event per stream, in order', async () => {
    const recorder = createRecorder(log, { flushEveryMs: 20 });
    await Promise.all([
      recorder.record('deliveries-a', 'ws', [step('d1', 1)]),
      recorder.record('deliveries-a', 'ws', [step('d2', 1), step('d1', 2)]),
      recorder.record('deliveries-b', 'ws', [step('d3', 1)]),
    ]);
    expect(await logged(log, 'deliveries-a')).to.deep.equal({ events: 1, steps: ['d1#1', 'd2#1', 'd1#2'] });
    expect(await logged(log, 'deliveries-b')).to.deep.equal({ events: 1, steps: ['d3#1'] });
  });

  it('writes an urgent record at the next turn, with what else that turn recorded, not at the next interval', async () => {
    // An interval no test would wait out: only the urgent path can settle these.
    const recorder = createRecorder(log, { flushEveryMs: 600_000 });
    const plain = recorder.record('deliveries-a', 'ws', [step('d1', 1)]);
    const urgent = recorder.record('deliveries-a', 'ws', [step('d2', 1)], true);
    const outcome = await Promise.race([Promise.all([plain, urgent]).then(() => 'written'), new Promise((resolve) => setTimeout(resolve, 10_000, 'waited for the interval'))]);
    expect(outcome).to.equal('written');
    expect(await logged(log, 'deliveries-a')).to.deep.equal({ events: 1, steps: ['d1#1', 'd2#1'] });
    // A plain record alone is still left for the interval.
    let settled = false;
    void recorder.record('deliveries-b', 'ws', [step('d3', 1)]).then(() => (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(settled).to.equal(false);
    expect((await logged(log, 'deliveries-b')).events).to.equal(0);
  });

  it('keeps one append at a time per stream: an urgent record behind one under way goes right after it, in order', async () => {
    let appends = 0;
    let slowFirst: (() => void) | null = null;
    const gate = new Promise<void>((resolve) => (slowFirst = resolve));
    const slow: EventLog = new Proxy(log, {
      get: (target, key) =>
        key === 'append'
          ? async (...args: Parameters<EventLog['append']>) => {
              if (appends++ === 0) await gate;
              return target.append(...args);
            }
          : Reflect.get(target, key),
    });
    const recorder = createRecorder(slow, { flushEveryMs: 600_000 });
    const first = recorder.record('deliveries-a', 'ws', [step('d1', 1)], true);
    await new Promise((resolve) => setImmediate(resolve));
    const second = recorder.record('deliveries-a', 'ws', [step('d1', 2)], true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(appends, 'the second waits for the first append').to.equal(1);
    (slowFirst as unknown as () => void)();
    await Promise.all([first, second]);
    expect(await logged(log, 'deliveries-a')).to.deep.equal({ events: 2, steps: ['d1#1', 'd1#2'] });
  });

  it('rejects the records of a batch whose append failed, and records the next batch', async () => {
    let fail = true;
    const flaky: EventLog = new Proxy(log, {
      get: (target, key) =>
        key === 'append'
          ? async (...args: Parameters<EventLog['append']>) => {
              if (fail) {
                fail = false;
                throw new Error('disk full');
              }
              return target.append(...args);
            }
          : Reflect.get(target, key),
    });
    const recorder = createRecorder(flaky, { flushEveryMs: 600_000 });
    const failed = await recorder.record('deliveries-a', 'ws', [step('d1', 1)], true).then(() => 'written', (error: Error) => error.message);
    expect(failed).to.equal('disk full');
    await recorder.record('deliveries-a', 'ws', [step('d1', 1)], true);
    expect(await logged(log, 'deliveries-a')).to.deep.equal({ events: 1, steps: ['d1#1'] });
  });
});
