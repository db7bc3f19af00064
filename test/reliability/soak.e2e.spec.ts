// A short soak in every test run (the long one is `npm run soak -- --minutes 10`): the torture's
// traffic against the embedded service for 15 s without crashes, sampled every 3 s through
// /admin/v1/metrics and /proc. Nothing may be lost or violated and every sample must be read; growth
// is judged only by the long run (15 s is warm-up). Five samples read both threads' figures as often
// as more would, and 15 s of three clients per workspace acknowledge hundreds of writes.
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { flatness, type Sample } from '../../scripts/soak/sampler.js';

const run = promisify(execFile);

const at = (i: number, rss: number, heap = 50, handles = 10, fds = 40, threadHeap: number | null = 30): Sample => ({
  at_s: i * 15,
  rss_mb: rss,
  heap_used_mb: heap,
  worker_heap_used_mb: threadHeap,
  active_handles: handles,
  open_fds: fds,
  event_loop_p99_ms: 5,
});

describe('soak (e2e, server process)', function () {
  this.timeout(180_000);

  it('runs 15 s of mixed traffic with every sample read and nothing lost or violated', async () => {
    const output = await run(process.execPath, ['--import', 'tsx', 'scripts/soak.ts', '--minutes', '0.25', '--sample-seconds', '3', '--clients', '3']).then(
      ({ stdout }) => stdout,
      // Exit code 1 (growth or violations): the last line says which, and the assertions below judge it.
      (error: { stdout?: string }) => error.stdout ?? '',
    );
    const figures = JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as Record<string, number>;
    expect(figures['samples'], output).to.be.at.least(5);
    expect(figures['violations'], output).to.equal(0);
    expect(figures['lost'], output).to.equal(0);
    expect(figures['acknowledged'], output).to.be.greaterThan(50);
    expect(figures['rss_mb_last'], output).to.be.greaterThan(0);
    // The delivery thread's heap is read too (the embedded service runs one).
    expect(figures['thread_heap_used_mb_last'], output).to.be.greaterThan(0);
  });
});

describe('soak flatness (unit)', () => {
  it('passes steady figures and fails growing memory (either thread), handles or descriptors', () => {
    const steady = [at(0, 300), ...Array.from({ length: 9 }, (_, i) => at(i + 1, 150 + (i % 3)))];
    expect(flatness(steady).flat).to.equal(true);
    const leaking = Array.from({ length: 10 }, (_, i) => at(i, 150 + i * 20));
    expect(flatness(leaking)).to.deep.include({ flat: false });
    expect(flatness(Array.from({ length: 10 }, (_, i) => at(i, 150, 50, 10 + i * 10))).flat).to.equal(false);
    expect(flatness(Array.from({ length: 10 }, (_, i) => at(i, 150, 50, 10, 40 + i * 10))).flat).to.equal(false);
    // A delivery thread whose heap grows while the main thread's stays flat: the leak this once hid.
    expect(flatness(Array.from({ length: 10 }, (_, i) => at(i, 150, 50, 10, 40, 30 + i * 10))).flat).to.equal(false);
    // Descriptors swinging with the connections open at each instant, over a floor that stays: flat.
    // (the means of the thirds differ by 55 here; the floors do not).
    const swinging = [118, 145, 112, 112, 150, 160, 170, 211, 112, 211];
    expect(flatness(swinging.map((fds, i) => at(i, 150, 50, 10, fds))).flat).to.equal(true);
    // A role without the thread reports none: judged on the rest.
    expect(flatness(Array.from({ length: 10 }, (_, i) => at(i, 150, 50, 10, 40, null))).flat).to.equal(true);
  });
});
