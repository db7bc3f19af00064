// Where a slow minute of the sustained bench came from, sampled through the run: the API process's
// event loop (prom-client's `nodejs_eventloop_lag_max_seconds`, the largest delay since the last
// scrape, at /admin/v1/metrics), the kernel's accept path (a bare TCP connect to the API's port,
// which the kernel completes without the process, unless its listen queue is full and the SYN is
// dropped: then it takes a retransmit, 1 s or more), the machine's listen-queue overflows
// (`TcpExtListenOverflows` in /proc/net/netstat, every process's), how many connections the bench's
// own HTTP client opened (undici's `undici:client:connected` channel), and how long the API's main
// thread ran and how long it was ready to run but waited for a core (/proc/PID/task/PID/schedstat):
// a loop held by its own work runs, one held by the scheduler waits, and one that does neither while
// it lags is blocked in a system call (an fsync). A slow request whose minute shows none of these
// waited inside the service, on something other than its event loop. With the same scrapes, the
// process's memory (resident, the main thread's heap in use and its worker threads' summed) and the
// time its main thread spent in major (mark-compact) GC: whether a lag that grows over a long run
// follows a heap that grows. And the CPU each of its threads took in the minute, by thread name
// (/proc/PID/task/*/stat): whether one thread's work grows with the history; and the CPU of the
// other processes named (the bench's own, its receiver), which share the host's cores with it.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readdirSync, readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { metricsText } from './engine-punctuality.js';

const SCRAPE_EVERY_MS = 5_000;
const PROBE_EVERY_MS = 500;
/** Probes of the main thread's scheduling summed into one stretch: a lag of seconds needs a long one. */
const STRETCH_SAMPLES = 4;
const PROBE_TIMEOUT_MS = 10_000;

export interface StallMinute {
  /** The API process's largest event-loop delay (ms); null when no scrape answered. */
  readonly loopLagMaxMs: number | null;
  /** The slowest bare TCP connect to the API's port (ms). */
  readonly connectMaxMs: number;
  /** Listen-queue overflows on the machine; null where /proc/net/netstat cannot be read. */
  readonly listenOverflows: number | null;
  /** Connections the bench's HTTP client opened. */
  readonly clientConnects: number;
  /** The most the API's main thread ran in any 2 s (STRETCH_SAMPLES probes); null without its pid. */
  readonly mainThreadRunMaxMs: number | null;
  /** The most it waited for a core in any 2 s. */
  readonly runQueueWaitMaxMs: number | null;
  /** The most memory the API process held resident, in MB; null when no scrape answered. */
  readonly rssMaxMb: number | null;
  /** The most heap its main thread had in use, in MB. */
  readonly heapUsedMaxMb: number | null;
  /** The most heap its worker threads had in use together, in MB. */
  readonly workerHeapUsedMaxMb: number | null;
  /** ms its main thread spent in major GC from the last scrape before the minute to its last one. */
  readonly majorGcMs: number | null;
  /** CPU seconds its threads took in the minute, by thread name (threads of one name summed), most first. */
  readonly threadCpuS: Readonly<Record<string, number>>;
  /** CPU seconds each other process named took in the minute. */
  readonly processCpuS: Readonly<Record<string, number>>;
}

/** ns the thread has run and waited on a run queue so far, or null (/proc/PID/task/TID/schedstat: on-CPU, waiting, slices). */
export const schedstat = (pid: number): { run: number; wait: number } | null => {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ').map(Number);
    return { run: run as number, wait: wait as number };
  } catch {
    return null;
  }
};

/** Clock ticks a second in /proc's CPU times (USER_HZ: 100 on Linux's common builds). */
const TICKS_PER_S = 100;

/** The name and CPU seconds so far (utime and stime) in a /proc stat file, or null when it cannot be read (the thread or process ended). */
export const statCpu = (file: string): { name: string; cpuS: number } | null => {
  try {
    const stat = readFileSync(file, 'utf8');
    // The name is in parentheses and may hold spaces: the fields after it are counted from its end.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), cpuS: (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S };
  } catch {
    return null;
  }
};

/** CPU seconds each labelled process has taken so far (one that ended or cannot be read: left out). */
export const processesCpu = (pids: Readonly<Record<string, number>>): Record<string, number> =>
  Object.fromEntries(Object.entries(pids).flatMap(([label, pid]) => {
    const time = statCpu(`/proc/${pid}/stat`);
    return time === null ? [] : [[label, time.cpuS]];
  }));

/** The host's CPU seconds so far, busy (everything but idle and I/O wait) and in all, over every core (/proc/stat). */
export const hostCpu = (): { busyS: number; totalS: number } => {
  const ticks = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').split(/\s+/).slice(1, 9).map(Number);
  const total = ticks.reduce((sum, n) => sum + n, 0);
  return { busyS: (total - (ticks[3] ?? 0) - (ticks[4] ?? 0)) / TICKS_PER_S, totalS: total / TICKS_PER_S };
};

/** CPU seconds each thread of `pid` has taken so far, by thread id, with its name. */
const threadTimes = (pid: number): Map<string, { name: string; cpuS: number }> => {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return new Map();
  }
  return new Map(tids.flatMap((tid) => {
    const time = statCpu(`/proc/${pid}/task/${tid}/stat`);
    return time === null ? [] : [[tid, time] as const];
  }));
};

/** The machine's listen-queue overflows so far, or null. */
const listenOverflows = (): number | null => {
  try {
    const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
    const at = lines.findIndex((line) => line.startsWith('TcpExt:'));
    const names = lines[at]?.split(/\s+/) ?? [];
    const values = lines[at + 1]?.split(/\s+/) ?? [];
    const i = names.indexOf('ListenOverflows');
    return i < 0 ? null : Number(values[i]);
  } catch {
    return null;
  }
};

/** ms until a bare TCP connection to `port` is established (PROBE_TIMEOUT_MS when it never is). */
const connectMs = (port: number): Promise<number> =>
  new Promise((resolve) => {
    const began = performance.now();
    const socket = connect({ host: '127.0.0.1', port, timeout: PROBE_TIMEOUT_MS });
    const done = () => {
      socket.destroy();
      resolve(performance.now() - began);
    };
    socket.once('connect', done).once('timeout', done).once('error', done);
  });

const LAG_MAX = /^nodejs_eventloop_lag_max_seconds (\S+)$/m;
const RSS = /^process_resident_memory_bytes (\S+)$/m;
const HEAP_USED = /^nodejs_heap_size_used_bytes (\S+)$/m;
const WORKER_HEAP_USED = /^nodejs_worker_heap_size_used_bytes\{[^}]*\} (\S+)$/gm;
/** The worker threads' heap in use in a /admin/v1/metrics text, summed; null when none answered. */
export const workerHeapUsed = (metrics: string): number | null => {
  const threads = [...metrics.matchAll(WORKER_HEAP_USED)];
  return threads.length === 0 ? null : threads.reduce((sum, match) => sum + Number(match[1]), 0);
};
const MAJOR_GC_SECONDS = /^nodejs_gc_duration_seconds_sum\{kind="major"\} (\S+)$/m;
const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;
/** The larger of a figure so far (null: none yet) and a scraped one. */
const larger = (so: number | null, seen: number) => Math.max(so ?? 0, seen);

export interface StallWatch {
  /** Stops sampling; one entry per minute from the start. */
  stop(): Promise<StallMinute[]>;
}

/** CPU seconds by name between two samples of the same threads or processes (one first seen in the minute counts from there). */
const cpuByName = (first: ReadonlyMap<string, { name: string; cpuS: number }>, last: ReadonlyMap<string, { name: string; cpuS: number }>): Record<string, number> => {
  const byName = new Map<string, number>();
  for (const [tid, end] of last) byName.set(end.name, (byName.get(end.name) ?? 0) + end.cpuS - (first.get(tid)?.cpuS ?? end.cpuS));
  return Object.fromEntries([...byName].filter(([, s]) => s >= 0.05).sort((a, b) => b[1] - a[1]).map(([name, s]) => [name, Math.round(s * 10) / 10]));
};

/** Samples until `stop()`, from now on, by minute; `apiPid`: the API process, whose main thread's waits for a core are read. */
export const watchStalls = (apiUrl: string, adminToken: string, apiPid?: number, processes: Readonly<Record<string, number>> = {}): StallWatch => {
  const startedMs = Date.now();
  const minuteOf = () => Math.floor((Date.now() - startedMs) / 60_000);
  const minutes: {
    loopLagMaxMs: number | null;
    connectMaxMs: number;
    overflowsAtStart: number | null;
    clientConnects: number;
    runMaxNs: number | null;
    waitMaxNs: number | null;
    rssMax: number | null;
    heapMax: number | null;
    workerHeapMax: number | null;
    /** The major GC seconds where the minute starts (the scrape before it) and at its last scrape. */
    gcFirst: number | null;
    gcLast: number | null;
    /** Each thread's CPU seconds where the minute starts (the sample before it), and at its last sample. */
    threadsFirst: Map<string, { name: string; cpuS: number }>;
    threadsLast: Map<string, { name: string; cpuS: number }>;
    /** The same for the other processes, by their label. */
    processesFirst: Map<string, { name: string; cpuS: number }>;
    processesLast: Map<string, { name: string; cpuS: number }>;
  }[] = [];
  const minute = (m: number) => {
    while (minutes.length <= m)
      minutes.push({
        loopLagMaxMs: null,
        connectMaxMs: 0,
        overflowsAtStart: listenOverflows(),
        clientConnects: 0,
        runMaxNs: null,
        waitMaxNs: null,
        rssMax: null,
        heapMax: null,
        workerHeapMax: null,
        gcFirst: null,
        gcLast: null,
        threadsFirst: new Map(),
        threadsLast: new Map(),
        processesFirst: new Map(),
        processesLast: new Map(),
      });
    return minutes[m] as (typeof minutes)[number];
  };
  /** The main thread's schedstat at the last STRETCH_SAMPLES + 1 probes. */
  const samples: { run: number; wait: number }[] = [];
  // The last sample before a minute is where the minute starts, so that no stretch between two
  // samples falls between two minutes.
  const lastThreads = new Map<string, { name: string; cpuS: number }>();
  const lastProcesses = new Map<string, { name: string; cpuS: number }>();
  let lastGc: number | null = null;
  const sampleThreads = () => {
    const m = minute(minuteOf());
    const seen = (key: string, time: { name: string; cpuS: number }, first: Map<string, { name: string; cpuS: number }>, last: Map<string, { name: string; cpuS: number }>, before: Map<string, { name: string; cpuS: number }>) => {
      if (!first.has(key)) first.set(key, before.get(key) ?? time);
      last.set(key, time);
      before.set(key, time);
    };
    for (const [label, cpuS] of Object.entries(processesCpu(processes))) seen(label, { name: label, cpuS }, m.processesFirst, m.processesLast, lastProcesses);
    if (apiPid === undefined) return;
    for (const [tid, time] of threadTimes(apiPid)) seen(tid, time, m.threadsFirst, m.threadsLast, lastThreads);
  };
  const sampleScheduling = () => {
    const now = apiPid === undefined ? null : schedstat(apiPid);
    if (now === null) return;
    samples.push(now);
    if (samples.length > STRETCH_SAMPLES + 1) samples.shift();
    const first = samples[0] as { run: number; wait: number };
    const m = minute(minuteOf());
    m.runMaxNs = Math.max(m.runMaxNs ?? 0, now.run - first.run);
    m.waitMaxNs = Math.max(m.waitMaxNs ?? 0, now.wait - first.wait);
  };
  minute(0);
  const onConnected = () => void minute(minuteOf()).clientConnects++;
  subscribe('undici:client:connected', onConnected);
  const port = Number(new URL(apiUrl).port);
  const pending = new Set<Promise<void>>();
  const track = (work: Promise<void>) => {
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };
  const probe = setInterval(() => {
    sampleScheduling();
    sampleThreads();
    track(
      connectMs(port).then((ms) => {
        const m = minute(minuteOf());
        m.connectMaxMs = Math.max(m.connectMaxMs, ms);
      }),
    );
  }, PROBE_EVERY_MS);
  const scrape = setInterval(
    () =>
      track(
        metricsText(apiUrl, adminToken, AbortSignal.timeout(30_000))
          .then((text) => {
            const m = minute(minuteOf());
            const figure = (pattern: RegExp) => {
              const match = pattern.exec(text);
              return match === null ? null : Number(match[1]);
            };
            // Whatever the scrape waited for, the delay it reports happened before it answered: in this minute or the last.
            const lag = figure(LAG_MAX);
            if (lag !== null) m.loopLagMaxMs = larger(m.loopLagMaxMs, lag * 1000);
            const rss = figure(RSS);
            if (rss !== null) m.rssMax = larger(m.rssMax, rss);
            const heap = figure(HEAP_USED);
            if (heap !== null) m.heapMax = larger(m.heapMax, heap);
            m.workerHeapMax = larger(m.workerHeapMax, workerHeapUsed(text) ?? 0);
            // No series yet: no major GC yet (prom-client adds a kind at its first).
            const gc = figure(MAJOR_GC_SECONDS) ?? (lag === null ? null : 0);
            if (gc !== null) {
              m.gcFirst ??= lastGc ?? gc;
              m.gcLast = gc;
              lastGc = gc;
            }
          })
          .catch(() => {}),
      ),
    SCRAPE_EVERY_MS,
  );
  return {
    async stop() {
      clearInterval(probe);
      clearInterval(scrape);
      await Promise.all([...pending]);
      unsubscribe('undici:client:connected', onConnected);
      const end = listenOverflows();
      return minutes.map((m, i) => {
        const next = minutes[i + 1]?.overflowsAtStart ?? end;
        return {
          loopLagMaxMs: m.loopLagMaxMs === null ? null : Math.round(m.loopLagMaxMs),
          connectMaxMs: Math.round(m.connectMaxMs * 10) / 10,
          listenOverflows: m.overflowsAtStart === null || next === null ? null : next - m.overflowsAtStart,
          clientConnects: m.clientConnects,
          mainThreadRunMaxMs: m.runMaxNs === null ? null : Math.round(m.runMaxNs / 1e6),
          runQueueWaitMaxMs: m.waitMaxNs === null ? null : Math.round(m.waitMaxNs / 1e6),
          rssMaxMb: m.rssMax === null ? null : mb(m.rssMax),
          heapUsedMaxMb: m.heapMax === null ? null : mb(m.heapMax),
          workerHeapUsedMaxMb: m.workerHeapMax === null ? null : mb(m.workerHeapMax),
          majorGcMs: m.gcFirst === null || m.gcLast === null ? null : Math.round((m.gcLast - m.gcFirst) * 1000),
          threadCpuS: cpuByName(m.threadsFirst, m.threadsLast),
          processCpuS: cpuByName(m.processesFirst, m.processesLast),
        };
      });
    },
  };
};
