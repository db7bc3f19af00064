// Fresh reads: every caller gets a read that started after its call (so it covers whatever was
// committed before), and callers arriving during a read share the next one.
import { expect } from 'chai';
import { createFreshRead } from '../../src/app/fresh-read.js';
import type { EventLog } from '../../src/log/event-log.js';

/** A log whose head reads resolve when the test says, each with the head as it was when the read began. */
const slowLog = () => {
  let head = 0;
  const reads: { started: number; finish: () => void }[] = [];
  const log = {
    headPosition: () =>
      new Promise<number>((resolve) => {
        const started = head;
        reads.push({ started, finish: () => resolve(started) });
      }),
  } as unknown as EventLog;
  return { log, reads, commit: () => (head += 1) };
};

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('fresh read (unit)', () => {
  it('answers a call made during a read with a read that began after it', async () => {
    const { log, reads, commit } = slowLog();
    const latest = createFreshRead(() => log.headPosition());
    const first = latest();
    commit(); // committed after the first read began, before the second call
    const second = latest();
    const third = latest();
    expect(reads).to.have.length(1);
    reads[0]?.finish();
    expect(await first).to.equal(0);
    await tick();
    expect(reads).to.have.length(2);
    reads[1]?.finish();
    expect(await second).to.equal(1);
    expect(await third).to.equal(1);
  });

  it('reads again after a failed read', async () => {
    let calls = 0;
    const log = { headPosition: async () => (++calls === 1 ? Promise.reject(new Error('busy')) : 7) } as unknown as EventLog;
    const latest = createFreshRead(() => log.headPosition());
    const failed = latest();
    const after = latest();
    await failed.then(
      () => expect.fail('the first read fails'),
      (error: Error) => expect(error.message).to.equal('busy'),
    );
    expect(await after).to.equal(7);
  });
});
