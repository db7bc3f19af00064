// The live loop of a subscription on the SQLite log waits for the next commit tens of thousands of
// times in a busy hour. Each wait must leave nothing behind: racing every commit against one promise
// that lived as long as the subscription added a reaction to it per wait, which grew the delivery
// thread's heap by ~30 MB in five minutes of soak.
import { expect } from 'chai';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { commitSignal, subscribeLoop } from '../../src/log/sqlite-subscription.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const heapAfterGc = (): number => {
  gc();
  return process.memoryUsage().heapUsed;
};

describe('SQLite subscription loop (unit)', () => {
  it('keeps nothing per wait for a commit: 100,000 idle waits leave the heap where it was', async () => {
    const commits = commitSignal();
    let waits = 0;
    // An empty log: every page is empty, so each turn of the loop waits for the next commit.
    const subscription = subscribeLoop(0, () => ((waits += 1), { events: [], scannedTo: 0 }), commits, () => undefined);
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    await settle();
    const commitMany = async (n: number) => {
      for (let i = 0; i < n; i += 1) {
        commits.notify();
        // The loop takes the wake-up and reads again within a few microtasks.
        await Promise.resolve();
        await Promise.resolve();
      }
      await settle();
    };
    await commitMany(10_000);
    const before = heapAfterGc();
    const waitsBefore = waits;
    await commitMany(100_000);
    const grown = heapAfterGc() - before;
    expect(waits - waitsBefore, 'the loop woke for the commits').to.be.greaterThan(50_000);
    // Leaking, each wait kept ~250 bytes (25 MB here); what is left must be noise.
    expect(grown, `${grown} bytes kept`).to.be.below(2 * 1024 * 1024);
    await subscription.stop();
  });

  it('stops while waiting for a commit that never comes', async () => {
    const commits = commitSignal();
    const subscription = subscribeLoop(0, () => ({ events: [], scannedTo: 0 }), commits, () => undefined);
    await new Promise((resolve) => setImmediate(resolve));
    await subscription.stop();
    await subscription.done;
  });
});
