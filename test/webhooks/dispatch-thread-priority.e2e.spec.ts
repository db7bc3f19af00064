// The embedded service (`npm start`'s process, ROLE=all) gives its delivery thread the cores first when
// they are short: its main thread, which serves the requests, runs at API_THREAD_NICE once it is up,
// the delivery thread and the launcher it is started from at the process's priority, the history
// index ten below the main thread. Each has a name of its own in /proc (what `ps -L` and `top -H` show).
// An API server (ROLE=api) lowers its main thread only when API_THREAD_NICE says so.
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { createProcessGroup, type ProcessGroup } from '../support/processes.js';
import { nicesOf, threadsOf } from '../support/threads.js';

describe('thread priorities of the embedded service (e2e)', function () {
  this.timeout(60_000);
  let group: ProcessGroup | undefined;
  let dataDir: string | undefined;

  before(function () {
    if (process.platform !== 'linux') this.skip();
  });
  afterEach(async () => {
    await group?.stopAll();
    if (dataDir !== undefined) rmSync(dataDir, { recursive: true, force: true });
    group = undefined;
    dataDir = undefined;
  });

  const start = async (env: Record<string, string>) => {
    dataDir ??= mkdtempSync(path.join(tmpdir(), 'sp-priority-'));
    group ??= createProcessGroup({ ROLE: 'all', DATA_DIR: dataDir });
    const service = await group.start('service', env);
    return service.child.pid!;
  };

  const embedded: { readonly title: string; readonly env: Record<string, string>; readonly main: number; readonly index: number }[] = [
    { title: 'runs the requests at nice 19 by default, delivery at the process’s 0, the history index at 19 too', env: {}, main: 19, index: 19 },
    { title: 'API_THREAD_NICE=5 puts the requests at 5 and the index ten below, at 15', env: { API_THREAD_NICE: '5' }, main: 5, index: 15 },
    { title: 'API_THREAD_NICE=0 leaves the requests at the process’s priority and the index at 10', env: { API_THREAD_NICE: '0' }, main: 0, index: 10 },
  ];
  for (const { title, env, main, index } of embedded) {
    it(title, async () => {
      const pid = await start(env);
      const threads = threadsOf(pid);
      expect(threads.find((t) => t.tid === pid)?.nice, 'the main thread').to.equal(main);
      expect(nicesOf(threads, 'webhook-deliver')).to.deep.equal([0]);
      expect(nicesOf(threads, 'thread-launcher')).to.deep.equal([0]);
      expect(nicesOf(threads, 'delivery-index')).to.deep.equal([index]);
    });
  }

  it('leaves an API server’s main thread as it is by default, and lowers it to API_THREAD_NICE when set', async () => {
    // Its Redis and Kafka are not needed to start it.
    const pid = await start({ ROLE: 'api' });
    expect(threadsOf(pid).find((t) => t.tid === pid)?.nice).to.equal(0);
    await group?.stopAll();
    const lowered = await start({ ROLE: 'api', API_THREAD_NICE: '19' });
    expect(threadsOf(lowered).find((t) => t.tid === lowered)?.nice).to.equal(19);
  });
});
