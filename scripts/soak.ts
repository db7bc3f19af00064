// `npm run soak -- --minutes M [--sample-seconds S] [--clients C] [--seed X]`: the torture's mixed
// traffic (writers, long polls, webhook subscriptions and their churn) against the embedded service
// for M minutes (default 10) without crashes, sampling the service process every S seconds (default
// 15): resident memory, heap (the main thread's and the delivery thread's), open handles, open
// descriptors, event-loop delay. At the end the
// torture's checks run (nothing lost, doubled or out of order) and the samples must stay flat (last
// third against the first, scripts/soak/sampler.ts). Last line: one JSON object; exit code 1 on a
// violation or growth.
import { runTorture } from './torture/main.js';
import { ADMIN_TOKEN } from './torture/service.js';
import { numberOption, printFindings } from './torture/cli.js';
import { violationCount } from './torture/findings.js';
import { flatness, sample, TOLERANCE, type Sample } from './soak/sampler.js';

const minutes = numberOption('minutes', 10);
const every = Math.max(1, numberOption('sample-seconds', 15));
const samples: Sample[] = [];
const startedAt = Date.now();
console.log(`soak: ${minutes} min, a sample every ${every} s`);
console.log('   t (s)   RSS MB   heap MB   thread heap MB   handles   fds   loop p99 ms');
const result = await runTorture({
  cycles: Math.max(3, Math.round((minutes * 60) / every)),
  secondsPerCycle: every,
  seed: numberOption('seed', Math.floor(Math.random() * 2 ** 31)),
  settleSeconds: 60,
  clientsPerWorkspace: numberOption('clients', 6),
  crash: false,
  log: () => undefined,
  async onCycle(service) {
    const s = await sample(service.url, ADMIN_TOKEN, service.pid, startedAt).catch((error: unknown) => {
      // The service went away under a soak without crashes: what it said last is the finding.
      console.log(`the service did not answer its sample (${String(error)}); its last output:\n${service.outputs(80)}`);
      throw error;
    });
    samples.push(s);
    console.log(
      [s.at_s, s.rss_mb, s.heap_used_mb, s.worker_heap_used_mb ?? '-', s.active_handles, s.open_fds, s.event_loop_p99_ms].map((v, i) => String(v).padStart([8, 9, 10, 17, 10, 6, 14][i] ?? 8)).join(''),
    );
  },
});

printFindings(result.findings);
const judged = flatness(samples);
if (!judged.flat) console.log(`not flat: growth ${JSON.stringify(judged.growth)} beyond ${JSON.stringify(TOLERANCE)}`);
const violations = violationCount(result.findings);
const [first, last] = [samples[1] ?? samples[0], samples.at(-1)];
console.log(
  JSON.stringify({
    minutes,
    samples: samples.length,
    acknowledged: result.summary.acknowledged,
    lost: result.summary.lost,
    violations,
    flat: judged.flat,
    rss_mb_first: first?.rss_mb,
    rss_mb_last: last?.rss_mb,
    heap_used_mb_first: first?.heap_used_mb,
    heap_used_mb_last: last?.heap_used_mb,
    thread_heap_used_mb_first: first?.worker_heap_used_mb,
    thread_heap_used_mb_last: last?.worker_heap_used_mb,
    handles_first: first?.active_handles,
    handles_last: last?.active_handles,
    fds_first: first?.open_fds,
    fds_last: last?.open_fds,
    event_loop_p99_ms_max: Math.max(...samples.map((s) => s.event_loop_p99_ms)),
    growth: judged.growth,
  }),
);
process.exit(violations > 0 || !judged.flat ? 1 : 0);
