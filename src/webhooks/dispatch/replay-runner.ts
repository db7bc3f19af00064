// Finds the replays to drive and drives each on one dispatcher at a time. The replays still running
// are read from the log at start (the requests not yet followed by an end, replay-records.ts), and new
// requests as the log records them (the API thread or servers append them). Each is driven by
// whichever dispatcher takes its lease (replay-leases.ts); the others keep it in view and try again
// every `pollMs`, so a replay whose dispatcher stopped or died is continued by another one from the
// cursor in the log. At most MAX_DRIVEN replays are driven at once per dispatcher, so replayed
// deliveries waiting or in flight stay under MAX_DRIVEN × REPLAY_WINDOW per dispatcher.
import { REPLAY_EVENTS, foldReplay } from '../../domain/replay/replay.js';
import type { LogSubscription, RecordedEvent } from '../../log/event-log.js';
import { driveReplay, type ReplayDriverDeps } from './replay-driver.js';
import type { ReplayLeases } from './replay-leases.js';
import { replayWhere, runningReplays, type ReplayWhere } from './replay-records.js';

const MAX_DRIVEN = 8;

export interface ReplayRunnerDeps extends Omit<ReplayDriverDeps, 'keep' | 'stopped'> {
  readonly leases: ReplayLeases;
  /** How often replays driven elsewhere are looked at (taken over when their lease ran out). */
  readonly pollMs?: number;
}

export interface ReplayRunner {
  start(): Promise<void>;
  /** Stops driving (leases given back, so another dispatcher continues at once). */
  stop(): Promise<void>;
}

export const createReplayRunner = (deps: ReplayRunnerDeps): ReplayRunner => {
  const { log, leases } = deps;
  /** Replays running as far as this dispatcher knows, driven here or not. */
  const inView = new Map<string, ReplayWhere>();
  const driving = new Map<string, Promise<void>>();
  let stopping = false;
  let timer: NodeJS.Timeout | undefined;
  let requests: LogSubscription | null = null;

  const drive = async (replayId: string, where: ReplayWhere): Promise<void> => {
    let renewedAt = Date.now();
    const keep = async (): Promise<boolean> => {
      if (Date.now() - renewedAt < leases.ttlMs / 3) return true;
      renewedAt = Date.now();
      return leases.renew(replayId);
    };
    try {
      const replay = foldReplay(await log.readStream(where.stream), replayId);
      const outcome = replay?.status !== 'running' ? 'finished' : await driveReplay({ ...deps, keep, stopped: () => stopping }, where.workspaceId, replay, where.stream);
      if (outcome === 'finished') inView.delete(replayId);
    } catch (error) {
      // Tried again at the next poll, from the cursor recorded.
      console.error(`webhook replay ${replayId}:`, error);
    } finally {
      driving.delete(replayId);
      await leases.release(replayId).catch(() => undefined);
    }
  };

  const tryDrive = async (replayId: string): Promise<void> => {
    const where = inView.get(replayId);
    if (where === undefined || stopping || driving.has(replayId) || driving.size >= MAX_DRIVEN) return;
    // Held in `driving` while the lease is asked for, so a poll meanwhile does not ask twice.
    let taken = (): void => undefined;
    driving.set(replayId, new Promise<void>((resolve) => (taken = resolve)));
    const acquired = await leases.acquire(replayId).catch((error: unknown) => {
      console.error(`webhook replay ${replayId}: lease:`, error);
      return false;
    });
    taken();
    if (!acquired || stopping) {
      driving.delete(replayId);
      if (acquired) await leases.release(replayId).catch(() => undefined);
      return;
    }
    driving.set(replayId, drive(replayId, where));
  };

  const poll = (): void => {
    for (const replayId of inView.keys()) void tryDrive(replayId);
  };

  const requested = (event: RecordedEvent): void => {
    const replayId = String(event.data['replay_id']);
    inView.set(replayId, replayWhere(event));
    void tryDrive(replayId);
  };

  return {
    async start() {
      // From before the scan: a request recorded meanwhile is seen twice, harmlessly.
      const after = await log.headPosition();
      for (const [replayId, where] of await runningReplays(log)) inView.set(replayId, where);
      requests = log.subscribe({ after, types: [REPLAY_EVENTS.requested] }, requested);
      requests.done.catch((error: unknown) => console.error('webhook replay requests stopped:', error));
      timer = setInterval(poll, deps.pollMs ?? 1_000);
      poll();
    },
    async stop() {
      stopping = true;
      clearInterval(timer);
      await requests?.stop();
      while (driving.size > 0) await Promise.allSettled([...driving.values()]);
    },
  };
};
