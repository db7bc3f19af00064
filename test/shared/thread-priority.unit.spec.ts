// A thread's own nice value: lowered in a worker thread, the worker runs at it while the process's
// other threads keep theirs.
import { expect } from 'chai';
import { getPriority } from 'node:os';
import { startWorker } from '../../src/shared/worker.js';

describe('thread priority (unit)', () => {
  it('lowers the calling thread alone', async function () {
    const before = getPriority(process.pid);
    if (process.platform !== 'linux' || before !== 0) this.skip();
    const worker = startWorker(new URL('../support/priority-worker.ts', import.meta.url), { workerData: {} });
    const answer = await new Promise<{ took: boolean; nice: number }>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
    await worker.terminate();
    expect(answer).to.deep.equal({ took: true, nice: 7 });
    expect(getPriority(process.pid)).to.equal(0);
  });
});
