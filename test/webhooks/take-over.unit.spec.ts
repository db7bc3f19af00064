// A take-over that failed part way waits before it reads again; a stop meanwhile ends that wait, so a
// service stopped while its index is away does not wait it out.
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from 'chai';
import { TAKE_OVER_RETRY_MS, takeOverMeanwhile } from '../../src/webhooks/dispatch/take-over.js';
import { gatedTakeOver, recordingDispatcher } from '../support/take-over.js';

describe('take-over while the engine runs (unit)', () => {
  it('ends at once when stopped in the pause before it reads again, and reads nothing more', async () => {
    const gated = gatedTakeOver('ws', 'wh', 3, 0);
    const { dispatcher, resumed } = recordingDispatcher();
    const takeOver = takeOverMeanwhile(dispatcher, await gated.read(), gated.read);
    // The first delivery fails the first read: the take-over now waits to read again.
    gated.release(3);
    await sleep(50);
    const outcome = await Promise.race([takeOver.stop().then(() => 'stopped'), sleep(TAKE_OVER_RETRY_MS / 2).then(() => 'still in its pause')]);
    expect(outcome).to.equal('stopped');
    expect(await takeOver.done, 'not all of it handed over').to.equal(false);
    await sleep(TAKE_OVER_RETRY_MS + 100);
    expect(gated.reads(), 'read once, never again').to.equal(1);
    expect(resumed).to.deep.equal([]);
  });
});
