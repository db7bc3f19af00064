// Worker threads started through the launcher (src/shared/thread-launcher.ts): they keep the priority
// the launcher was started with after their owner lowered its own (a thread inherits its creator's),
// and their owner sees them as it sees a Worker: messages both ways, an error then the exit, the
// exit code, terminate.
import { expect } from 'chai';
import { getPriority } from 'node:os';
import { createThreadLauncher, type LaunchedWorker, type ThreadLauncher } from '../../src/shared/thread-launcher.js';
import { startWorker } from '../../src/shared/worker.js';

const WORKER = new URL('../support/launched-worker.ts', import.meta.url);

const next = <T>(worker: LaunchedWorker, event: 'message' | 'error' | 'exit') => new Promise<T>((resolve) => worker.on(event, resolve));
/** What the worker answers to `text`. */
const ask = (worker: LaunchedWorker, text: string) => {
  const answer = next<{ echo: string; threadId: number }>(worker, 'message');
  worker.postMessage(text);
  return answer;
};

describe('thread launcher (unit)', () => {
  let launcher: ThreadLauncher | undefined;
  afterEach(async () => {
    await launcher?.close();
    launcher = undefined;
  });

  it('starts a worker at the launcher’s priority after its owner lowered its own, where one the owner starts inherits the owner’s', async function () {
    if (process.platform !== 'linux' || getPriority(process.pid) !== 0) this.skip();
    // The owner is a worker of its own: this thread's priority stays as it is.
    const owner = startWorker(new URL('../support/niced-owner-worker.ts', import.meta.url), { workerData: {} });
    const nices = await new Promise((resolve, reject) => {
      owner.once('message', resolve);
      owner.once('error', reject);
    });
    await owner.terminate();
    expect(nices).to.deep.equal({ launched: 0, direct: 12 });
  });

  it('relays messages both ways and names the worker’s thread id', async () => {
    launcher = createThreadLauncher();
    const worker = launcher.start(WORKER, { workerData: {}, name: 'echo' });
    const { echo, threadId } = await ask(worker, 'hello');
    expect(echo).to.equal('hello');
    expect(worker.threadId).to.equal(threadId).and.be.greaterThan(0);
    const exit = next<number>(worker, 'exit');
    await worker.terminate();
    expect(await exit).to.equal(1);
  });

  it('reports what a worker threw, then its exit', async () => {
    launcher = createThreadLauncher();
    const worker = launcher.start(WORKER, { workerData: {}, name: 'thrower' });
    const seen: string[] = [];
    worker.on('error', (error: Error) => seen.push(`error: ${error.message}`));
    const exit = next<number>(worker, 'exit');
    worker.postMessage('throw');
    expect(await exit).to.equal(1);
    expect(seen).to.deep.equal(['error: boom in the launched worker']);
  });

  it('reports a worker’s own exit code, and starts another after it', async () => {
    launcher = createThreadLauncher();
    const first = launcher.start(WORKER, { workerData: {}, name: 'first' });
    const exit = next<number>(first, 'exit');
    first.postMessage('exit 3');
    expect(await exit).to.equal(3);
    const second = launcher.start(WORKER, { workerData: {}, name: 'second' });
    expect((await ask(second, 'again')).echo).to.equal('again');
    await second.terminate();
  });

  it('a module that cannot start is an error and an exit, not a dead launcher', async () => {
    launcher = createThreadLauncher();
    const missing = launcher.start(new URL('../support/no-such-worker.js', import.meta.url), { workerData: {}, name: 'missing' });
    const errors: unknown[] = [];
    missing.on('error', (error) => errors.push(error));
    expect(await next<number>(missing, 'exit')).to.equal(1);
    expect(errors).to.have.length(1);
    const worker = launcher.start(WORKER, { workerData: {}, name: 'after' });
    expect((await ask(worker, 'still here')).echo).to.equal('still here');
    await worker.terminate();
  });

  it('once its thread is gone, still starts a worker, from the calling thread', async () => {
    launcher = createThreadLauncher();
    await launcher.close();
    await new Promise((resolve) => setImmediate(resolve));
    const worker = launcher.start(WORKER, { workerData: {}, name: 'direct' });
    expect((await ask(worker, 'no launcher')).echo).to.equal('no launcher');
    await worker.terminate();
  });

  it('ends its workers when it is closed, and their owners learn it as an exit', async () => {
    launcher = createThreadLauncher();
    const worker = launcher.start(WORKER, { workerData: {}, name: 'orphan' });
    await ask(worker, 'up');
    const exit = next<number>(worker, 'exit');
    await launcher.close();
    expect(await exit).to.equal(1);
  });
});
