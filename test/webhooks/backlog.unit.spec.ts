// The backlog's log lines: one per period while the earliest waiting attempt is over a second late,
// one when it has caught up, none while it keeps up; a failed read is reported, not thrown.
import { expect } from 'chai';
import { lateSeconds, watchBacklog, type DeliveryBacklog } from '../../src/webhooks/dispatch/backlog.js';

const NOW = 1_000_000_000_000;
const late = (seconds: number, waiting = 7): DeliveryBacklog => ({ waiting, oldestDueAt: NOW - seconds * 1_000_000 });

describe('webhook delivery backlog (unit)', () => {
  const original = { warn: console.warn, log: console.log, error: console.error };
  let lines: string[] = [];
  beforeEach(() => {
    lines = [];
    console.warn = (...args: unknown[]) => void lines.push(`warn ${args.map(String).join(' ')}`);
    console.log = (...args: unknown[]) => void lines.push(`log ${args.map(String).join(' ')}`);
    console.error = (...args: unknown[]) => void lines.push(`error ${String(args[0])}`);
  });
  afterEach(() => Object.assign(console, original));

  it('is late by the time since the earliest waiting attempt fell due, and never less than 0', () => {
    expect(lateSeconds(late(2.5), NOW)).to.equal(2.5);
    expect(lateSeconds({ waiting: 3, oldestDueAt: NOW + 5_000_000 }, NOW)).to.equal(0);
    expect(lateSeconds({ waiting: 0, oldestDueAt: null }, NOW)).to.equal(0);
  });

  it('logs each period while late, once when caught up, and nothing while on time', async () => {
    const readings: (DeliveryBacklog | Error)[] = [late(0.5), late(3.04), late(2), new Error('thread gone'), late(0, 0), late(0, 0), late(0.9)];
    const watching = watchBacklog(
      async () => {
        const next = readings.shift() ?? late(0, 0);
        if (next instanceof Error) throw next;
        return next;
      },
      () => NOW,
      5,
    );
    await new Promise((resolve) => setTimeout(resolve, 80));
    watching.stop();
    expect(lines).to.deep.equal([
      'warn webhook deliveries behind: 7 attempts waiting, the earliest due 3.0 s ago',
      'warn webhook deliveries behind: 7 attempts waiting, the earliest due 2.0 s ago',
      'error webhook delivery backlog: cannot read it:',
      'log webhook deliveries caught up: 0 attempts waiting, none late',
    ]);
  });
});
